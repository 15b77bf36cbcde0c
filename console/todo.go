package console

import "net/http"

// The screens' APIs not built yet: each answers 501 until its file
// replaces it here (docs/console.md).

func notBuilt(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotImplemented, "NotBuilt", "not built yet: "+r.URL.Path)
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) { notBuilt(w, r) }
func (s *Server) tail(w http.ResponseWriter, r *http.Request)     { notBuilt(w, r) }
func (s *Server) produce(w http.ResponseWriter, r *http.Request)  { notBuilt(w, r) }
func (s *Server) series(w http.ResponseWriter, r *http.Request)   { notBuilt(w, r) }
