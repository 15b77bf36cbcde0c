package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"gostream/controller/quorum"
	"gostream/transport"
)

// A change of the controller group is refused before anything is done
// when it cannot be made as asked; an add must name a candidate of the
// --controller list at its address there.
func TestCandidacyCheckChange(t *testing.T) {
	cd := &Candidacy{cfg: CandidacyConfig{Candidates: []quorum.Candidate{{ID: 1, Addr: "127.0.0.1:9401"}, {ID: 2, Addr: "127.0.0.1:9402"}}}}
	for _, tc := range []struct {
		name string
		req  transport.ControllerChangeRequest
		want string // "" when allowed
	}{
		{"transfer", transport.ControllerChangeRequest{Op: transport.ControllerTransfer, ID: 2}, ""},
		{"remove", transport.ControllerChangeRequest{Op: transport.ControllerRemove, ID: 2}, ""},
		{"add listed", transport.ControllerChangeRequest{Op: transport.ControllerAdd, ID: 2, Addr: "127.0.0.1:9402"}, ""},
		{"add at another address", transport.ControllerChangeRequest{Op: transport.ControllerAdd, ID: 2, Addr: "127.0.0.1:9499"},
			"candidate 2 is listed in this node's --controller at 127.0.0.1:9402, not 127.0.0.1:9499"},
		{"add not listed", transport.ControllerChangeRequest{Op: transport.ControllerAdd, ID: 9, Addr: "127.0.0.1:1"},
			"candidate 9@127.0.0.1:1 is not in the active controller's --controller list (1@127.0.0.1:9401,2@127.0.0.1:9402)"},
		{"unknown op", transport.ControllerChangeRequest{Op: "promote", ID: 2}, `controller change "promote": want transfer, add or remove`},
		{"no id", transport.ControllerChangeRequest{Op: transport.ControllerTransfer}, "want a candidate id, a positive number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := cd.CheckChange(tc.req)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, transport.ErrInvalidRequest)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
