package console

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The console's routes: its files for GET, its API's paths, and JSON 404
// for a path of the API it does not have.
func TestRoutes(t *testing.T) {
	s := New(Config{})
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/ui/", http.StatusOK},
		{http.MethodHead, "/ui/", http.StatusOK},
		{http.MethodPost, "/ui/", http.StatusMethodNotAllowed},
		{http.MethodGet, "/ui/api/whoami", http.StatusOK},
		{http.MethodGet, "/ui/api/nothing", http.StatusNotFound},
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		assert.Equal(t, tc.code, w.Code, "%s %s: %s", tc.method, tc.path, w.Body)
	}
}
