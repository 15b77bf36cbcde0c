package console

import "net/http"

// The screens' APIs not built yet: each answers 501 until its file
// replaces it here (docs/console.md).

func notBuilt(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotImplemented, "NotBuilt", "not built yet: "+r.URL.Path)
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request)     { notBuilt(w, r) }
func (s *Server) topics(w http.ResponseWriter, r *http.Request)       { notBuilt(w, r) }
func (s *Server) topic(w http.ResponseWriter, r *http.Request)        { notBuilt(w, r) }
func (s *Server) groups(w http.ResponseWriter, r *http.Request)       { notBuilt(w, r) }
func (s *Server) group(w http.ResponseWriter, r *http.Request)        { notBuilt(w, r) }
func (s *Server) resetOffsets(w http.ResponseWriter, r *http.Request) { notBuilt(w, r) }
func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request)  { notBuilt(w, r) }
func (s *Server) streams(w http.ResponseWriter, r *http.Request)      { notBuilt(w, r) }
func (s *Server) acls(w http.ResponseWriter, r *http.Request)         { notBuilt(w, r) }
func (s *Server) addACL(w http.ResponseWriter, r *http.Request)       { notBuilt(w, r) }
func (s *Server) removeACL(w http.ResponseWriter, r *http.Request)    { notBuilt(w, r) }
func (s *Server) history(w http.ResponseWriter, r *http.Request)      { notBuilt(w, r) }
func (s *Server) lag(w http.ResponseWriter, r *http.Request)          { notBuilt(w, r) }
