package console

import (
	"net/http"

	"gostream/client"
	"gostream/metadata"
)

// ACL is one access control entry (docs/security.md): Principal ("*"
// for every authenticated principal) may do Operation on the Resource
// (cluster, topic, group, stream) named Name ("" for the cluster; "*"
// for every one of its type), or on every one whose name begins with
// Name when Pattern is prefix. It is the body of POST and DELETE
// /ui/api/acls, where Pattern may be left out for literal.
type ACL struct {
	Principal string `json:"principal"`
	Resource  string `json:"resource"`
	Name      string `json:"name"`
	Pattern   string `json:"pattern"`
	Operation string `json:"operation"`
}

// ACLs is the answer of GET /ui/api/acls: every entry, sorted, as the
// active controller holds them.
type ACLs struct {
	ACLs []ACL `json:"acls"`
}

// ACLChange is the answer of POST and DELETE /ui/api/acls: the entry,
// and whether the cluster's ACLs changed (false when an added entry was
// there already, or a removed one was not).
type ACLChange struct {
	Entry   ACL  `json:"entry"`
	Changed bool `json:"changed"`
}

func (s *Server) acls(w http.ResponseWriter, r *http.Request) {
	c, ctx, cancel, ok := s.ask(w, r, metadata.OpDescribe, metadata.ResourceCluster, "")
	if !ok {
		return
	}
	defer cancel()
	entries, err := c.ListACLs(ctx, "")
	if err != nil {
		writeErr(w, err)
		return
	}
	out := ACLs{ACLs: make([]ACL, 0, len(entries))}
	for _, e := range entries {
		out.ACLs = append(out.ACLs, ACL(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) addACL(w http.ResponseWriter, r *http.Request)    { s.changeACL(w, r, true) }
func (s *Server) removeACL(w http.ResponseWriter, r *http.Request) { s.changeACL(w, r, false) }

// changeACL adds or removes one entry, with the request's principal as
// the requester the audit trail records. An entry the cluster would
// refuse is 400, and nothing is sent.
func (s *Server) changeACL(w http.ResponseWriter, r *http.Request, add bool) {
	if err := s.allowed(r, metadata.OpAlter, metadata.ResourceCluster, ""); err != nil {
		writeErr(w, err)
		return
	}
	var e ACL
	if !readJSON(w, r, &e) {
		return
	}
	if e.Pattern == "" {
		e.Pattern = string(metadata.PatternLiteral)
	}
	a := metadata.ACL{Principal: e.Principal, Resource: metadata.ResourceType(e.Resource), Name: e.Name,
		Pattern: metadata.PatternType(e.Pattern), Operation: metadata.Operation(e.Operation)}
	if err := a.Validate(); err != nil {
		badRequest(w, err.Error())
		return
	}
	c, ctx, cancel, ok := s.dial(w, r)
	if !ok {
		return
	}
	defer cancel()
	change := c.RemoveACLs
	if add {
		change = c.AddACLs
	}
	changed, err := change(ctx, []client.ACL{client.ACL(e)}, s.requester(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ACLChange{Entry: e, Changed: len(changed) > 0})
}
