package console

import (
	"net/http"

	"gostream/metadata"
)

// Whoami is the answer of GET /ui/api/whoami: who asks, and what they may
// do to the cluster, so that the page hides what they may not.
type Whoami struct {
	// Principal is the request's principal; "" with authentication off.
	Principal string `json:"principal"`
	// Security is whether authentication is on; off, the page shows that
	// anyone who reaches the port can act.
	Security bool   `json:"security"`
	Node     int32  `json:"node"`
	Version  string `json:"version"`
	// Cluster is what the principal may do to the cluster.
	Cluster ClusterRights `json:"cluster"`
}

// ClusterRights is what a principal may do to the cluster.
type ClusterRights struct {
	Describe bool `json:"describe"`
	Alter    bool `json:"alter"`
	Operate  bool `json:"operate"`
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Whoami{
		Principal: s.principal(r),
		Security:  s.cfg.Security,
		Node:      s.cfg.NodeID,
		Version:   s.cfg.Version,
		Cluster: ClusterRights{
			Describe: s.may(r, metadata.OpDescribe, metadata.ResourceCluster, ""),
			Alter:    s.may(r, metadata.OpAlter, metadata.ResourceCluster, ""),
			Operate:  s.may(r, metadata.OpOperate, metadata.ResourceCluster, ""),
		},
	})
}
