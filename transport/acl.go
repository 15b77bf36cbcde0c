package transport

// APIACL lists, adds and removes access control entries (ACLRequest as
// JSON, answered with ACLResponse as JSON). A list is answered by any
// node from its metadata; an add or a remove is a change of the
// controller's.
const APIACL API = 45

func init() {
	apiNames[APIACL] = "ACL"
}

// ACL operations (ACLRequest.Op).
const (
	ACLList   = "list"
	ACLAdd    = "add"
	ACLRemove = "remove"
)

// ACLEntry is one access control entry, as docs/security.md describes
// it: the fields of metadata.ACL.
type ACLEntry struct {
	Principal string `json:"principal"`
	Resource  string `json:"resource"`
	Name      string `json:"name,omitempty"`
	Pattern   string `json:"pattern"`
	Operation string `json:"operation"`
}

// ACLRequest asks for the ACLs (Op list, of Principal when set), or to add
// or remove Entries.
type ACLRequest struct {
	Op        string     `json:"op"`
	Principal string     `json:"principal,omitempty"`
	Entries   []ACLEntry `json:"entries,omitempty"`
	Requester string     `json:"requester,omitempty"`
}

// ACLResponse is the ACLs a list found, or for an add or a remove the
// entries it changed (those already there, or not there, are left out).
type ACLResponse struct {
	Entries []ACLEntry `json:"entries"`
	// MetadataEpoch is the epoch of the metadata listed, or of the change.
	MetadataEpoch int64 `json:"metadata_epoch"`
}

// MaxACLEntries bounds the entries of one ACLRequest.
const MaxACLEntries = 1000
