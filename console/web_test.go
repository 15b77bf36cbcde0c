package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// webFiles returns every embedded file of the page, by its path under
// web/.
func webFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := fs.WalkDir(web, "web", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := web.ReadFile(p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, "web/")] = string(b)
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, files, "index.html")
	return files
}

// The page's code must run under the console's content security policy
// (no inline script or style), and must never turn data into markup: a
// record holding <script> is shown, not run. So no file uses an HTML
// sink, and the live tail uses fetch, which can send the token in a
// header, never EventSource, which cannot.
func TestWebHasNoInlineCodeAndNoHTMLSinks(t *testing.T) {
	inline := map[string]*regexp.Regexp{
		"an inline script":           regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`),
		"a script without src":       regexp.MustCompile(`(?i)<script(?:\s+(?:type|defer|async)(?:="[^"]*")?)*\s*>`),
		"a style element":            regexp.MustCompile(`(?i)<style`),
		"a style attribute":          regexp.MustCompile(`(?i)\sstyle=`),
		"an event handler attribute": regexp.MustCompile(`(?i)\son[a-z]+=`),
		"a javascript: URL":          regexp.MustCompile(`(?i)javascript:`),
	}
	sinks := map[string]*regexp.Regexp{
		"innerHTML":          regexp.MustCompile(`innerHTML`),
		"outerHTML":          regexp.MustCompile(`outerHTML`),
		"insertAdjacentHTML": regexp.MustCompile(`insertAdjacentHTML`),
		"document.write":     regexp.MustCompile(`document\.write`),
		"eval":               regexp.MustCompile(`\beval\(`),
		"new Function":       regexp.MustCompile(`new Function`),
		"a style attribute":  regexp.MustCompile(`setAttribute\(\s*'style'`),
		"EventSource":        regexp.MustCompile(`EventSource\(`),
		"localStorage":       regexp.MustCompile(`localStorage`),
		"document.cookie":    regexp.MustCompile(`document\.cookie`),
	}
	for name, body := range webFiles(t) {
		switch path.Ext(name) {
		case ".html":
			for what, re := range inline {
				assert.False(t, re.MatchString(body), "%s holds %s: %q", name, what, re.FindString(body))
			}
		case ".js":
			for what, re := range sinks {
				assert.False(t, re.MatchString(body), "%s uses %s", name, what)
			}
		}
	}
}

// Every module the page imports, and every file index.html names, is
// embedded: a wrong path would leave the page blank in a browser.
func TestWebReferencesResolve(t *testing.T) {
	files := webFiles(t)
	imports := regexp.MustCompile(`(?m)^\s*import\s+(?:[^'"]*\s+from\s+)?'([^']+)'`)
	refs := regexp.MustCompile(`(?:src|href)="([^"#:]+)"`)
	for name, body := range files {
		var found [][]string
		switch path.Ext(name) {
		case ".js":
			found = imports.FindAllStringSubmatch(body, -1)
		case ".html":
			found = refs.FindAllStringSubmatch(body, -1)
		}
		for _, m := range found {
			target := path.Join(path.Dir(name), m[1])
			assert.Contains(t, files, target, "%s refers to %s, which is not under web/", name, m[1])
		}
	}
}

// The page and its modules are served with the types a browser needs to
// run them (a module script with another type is refused) and the
// console's headers.
func TestWebServedWithTypesAndHeaders(t *testing.T) {
	srv := New(Config{})
	defer srv.Close()
	for p, ctype := range map[string]string{
		"/ui/":                   "text/html",
		"/ui/assets/app.js":      "text/javascript",
		"/ui/assets/console.css": "text/css",
		"/ui/assets/icon.svg":    "image/svg+xml",
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		require.Equal(t, http.StatusOK, rec.Code, p)
		assert.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), ctype), "%s: Content-Type %q, want %s", p, rec.Header().Get("Content-Type"), ctype)
		assert.Contains(t, rec.Header().Get("Content-Security-Policy"), "default-src 'self'", p)
		assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"), p)
	}
}
