package rpcapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"gostream/transport"
)

// Every API says what it needs (access.go): one a new API forgot would be
// refused while authorization is on, and allowed to anyone while it is
// off.
func TestEveryAPISaysWhatItNeeds(t *testing.T) {
	n := 0
	for api := transport.API(1); api < 1000; api++ {
		name := api.String()
		if strings.HasPrefix(name, "API") || api == transport.APIAuthenticate {
			continue // no such API, or the transport's own
		}
		n++
		_, ok := apiAccess[api]
		assert.True(t, ok, "API %s (%d) is missing from apiAccess", name, api)
	}
	assert.GreaterOrEqual(t, n, 39, "the APIs of today")
}
