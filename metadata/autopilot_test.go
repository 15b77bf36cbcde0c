package metadata_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

// The autopilot's lease holder is part of the metadata: validated,
// cloned deep, kept through JSON, and absent from the JSON when nobody
// holds it.
func TestAutopilotLeaseValidClonedAndKept(t *testing.T) {
	c := validCluster()
	data, err := json.Marshal(c)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "autopilot", "no holder, no field")

	c.Autopilot = &metadata.AutopilotLease{Holder: "autopilot:ops@host:42", TTLMillis: 10_000}
	require.NoError(t, c.Validate())
	n := c.Clone()
	n.Autopilot.Holder = "other"
	assert.Equal(t, "autopilot:ops@host:42", c.Autopilot.Holder, "Clone shares the lease")

	data, err = json.Marshal(c)
	require.NoError(t, err)
	back, err := metadata.Parse(data, "test")
	require.NoError(t, err)
	assert.Equal(t, c.Autopilot, back.Autopilot)

	for name, l := range map[string]*metadata.AutopilotLease{
		"no holder":       {TTLMillis: 1000},
		"holder too long": {Holder: strings.Repeat("a", metadata.MaxAutopilotHolder+1), TTLMillis: 1000},
		"no ttl":          {Holder: "a"},
		"negative ttl":    {Holder: "a", TTLMillis: -1},
		"ttl too long":    {Holder: "a", TTLMillis: metadata.MaxAutopilotTTLMillis + 1},
	} {
		c.Autopilot = l
		assert.ErrorIs(t, c.Validate(), metadata.ErrInvalid, name)
	}
}
