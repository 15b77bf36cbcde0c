package console

import (
	"embed"
	"io/fs"
	"net/http"
)

// web holds the console's page and files as they are in the repository:
// no build step makes them.
//
//go:embed web
var web embed.FS

// staticFiles serves web/ under /ui/: /ui/ is web/index.html.
func staticFiles() http.Handler {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic("console: the embedded files: " + err.Error()) // web/ is always there
	}
	return http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
}
