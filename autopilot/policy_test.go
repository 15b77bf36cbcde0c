package autopilot

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bound follows memberlist's LAN settings, which the nodes run:
// 1 s + 0.5 s + 4 s up to 9 nodes, the suspicion growing with log10 n.
func TestGossipBound(t *testing.T) {
	assert.Equal(t, 5500*time.Millisecond, GossipBound(1))
	assert.Equal(t, 5500*time.Millisecond, GossipBound(9))
	assert.Equal(t, 9500*time.Millisecond, GossipBound(100))
}

func TestPolicyValidate(t *testing.T) {
	require.NoError(t, DefaultPolicy().Validate(3))
	at := func(fn func(*Policy)) Policy {
		p := DefaultPolicy()
		fn(&p)
		return p
	}
	require.NoError(t, at(func(p *Policy) { p.FailoverAfter, p.PollInterval = 5500*time.Millisecond, time.Second }).Validate(3), "the bound itself")
	require.NoError(t, at(func(p *Policy) { p.RecoverAfter, p.LeadersBackAfter = Off, 0 }).Validate(3))
	for name, tc := range map[string]struct {
		p    Policy
		n    int
		want string
	}{
		"grace below the gossip bound": {at(func(p *Policy) { p.FailoverAfter = 5 * time.Second }), 3,
			"--failover-after 5s is shorter than the 5.5s gossip needs to find a dead node dead (the nodes' gossip (memberlist's LAN settings) probes each member every 1s, waits 500ms for the answer, then holds an unanswered member suspect for 4s in a cluster of up to 9 nodes before it declares it dead)"},
		"grace below the bound of a large cluster": {at(func(p *Policy) { p.FailoverAfter = 9 * time.Second }), 100, "shorter than the 9.5s gossip needs"},
		"no grace":               {at(func(p *Policy) { p.FailoverAfter = 0 }), 3, "--failover-after 0s: want a positive duration"},
		"no poll":                {at(func(p *Policy) { p.PollInterval = 0 }), 3, "--poll-interval 0s"},
		"poll too slow":          {at(func(p *Policy) { p.PollInterval = 6 * time.Second }), 3, "more than half of --failover-after"},
		"lease of two polls":     {at(func(p *Policy) { p.LeaseTTL = 2 * time.Second }), 3, "less than three poll intervals"},
		"negative recover grace": {at(func(p *Policy) { p.RecoverAfter = -2 * time.Second }), 3, "--recover-after -2s"},
		"negative leaders grace": {at(func(p *Policy) { p.LeadersBackAfter = -2 * time.Second }), 3, "--leaders-back-after -2s"},
		"lease too long":         {at(func(p *Policy) { p.LeaseTTL = 2 * time.Hour }), 3, "want 1s to 1h"},
	} {
		err := tc.p.Validate(tc.n)
		require.ErrorIs(t, err, ErrInvalidPolicy, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
}

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"failover_after": "15s", "leaders_back_after": "off", "recover_after": "0s"}`), DefaultPolicy())
	require.NoError(t, err)
	want := DefaultPolicy()
	want.FailoverAfter, want.LeadersBackAfter, want.RecoverAfter = 15*time.Second, Off, 0
	assert.Equal(t, want, p)
	for name, data := range map[string]string{
		"unknown key":             `{"failover_afterr": "15s"}`,
		"not a duration":          `{"failover_after": "soon"}`,
		"off where it may not be": `{"failover_after": "off"}`,
		"not JSON":                `failover_after: 15s`,
	} {
		_, err := ParsePolicy([]byte(data), DefaultPolicy())
		assert.ErrorIs(t, err, ErrInvalidPolicy, name)
	}
}

// metric is the value of one series as the metrics handler serves it,
// -1 when it is not there.
func metric(t *testing.T, m *Metrics, series string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return -1
}
