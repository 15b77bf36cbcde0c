package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/storage"
	"gostream/transport"
)

func TestParseControllers(t *testing.T) {
	type bad struct{ value, reason string } // the FieldError expected
	tests := []struct {
		in   string
		want []ControllerAddr
		bad  *bad
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "1@127.0.0.1:9400", want: []ControllerAddr{{1, "127.0.0.1:9400"}}},
		{in: "1@a:1, 2@b:2 ,3@[::1]:3", want: []ControllerAddr{{1, "a:1"}, {2, "b:2"}, {3, "[::1]:3"}}},
		{in: "12@:9400", want: []ControllerAddr{{12, ":9400"}}},
		{in: "x", bad: &bad{"x", "want ID@HOST:PORT"}},
		{in: "1@a:1,x", bad: &bad{"x", "want ID@HOST:PORT"}},
		{in: "1@a:1,", bad: &bad{"", "want ID@HOST:PORT"}},
		{in: "@a:1", bad: &bad{"@a:1", "positive integer"}},
		{in: "0@a:1", bad: &bad{"0@a:1", "positive integer"}},
		{in: "-1@a:1", bad: &bad{"-1@a:1", "positive integer"}},
		{in: "one@a:1", bad: &bad{"one@a:1", "positive integer"}},
		{in: "99999999999@a:1", bad: &bad{"99999999999@a:1", "positive integer"}},
		{in: "1@a", bad: &bad{"1@a", "want ID@HOST:PORT"}},
		{in: "1@a:port", bad: &bad{"1@a:port", "PORT a number"}},
		{in: "1@a:65536", bad: &bad{"1@a:65536", "PORT a number"}},
		{in: "1@", bad: &bad{"1@", "want ID@HOST:PORT"}},
		{in: "1@a:1,1@b:2", bad: &bad{"1@b:2", "listed twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseControllers(tt.in)
			if tt.bad == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.Error(t, err)
			assert.Nil(t, got)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "Controllers", fe.Field)
			assert.Equal(t, tt.bad.value, fe.Value)
			assert.Contains(t, fe.Reason, tt.bad.reason)
		})
	}
}

func TestParseControllersRoundTrips(t *testing.T) {
	cs := []ControllerAddr{{1, "127.0.0.1:9400"}, {2, "host:9410"}}
	text := cs[0].String() + "," + cs[1].String()
	assert.Equal(t, "1@127.0.0.1:9400,2@host:9410", text)
	got, err := ParseControllers(text)
	require.NoError(t, err)
	assert.Equal(t, cs, got)
}

func TestConfigValidate(t *testing.T) {
	valid := Config{ID: 1, DataDir: "/tmp/x"}
	tests := []struct {
		name      string
		mutate    func(*Config)
		wantField string // "" means valid
	}{
		{"minimal", func(*Config) {}, ""},
		{"all set", func(c *Config) {
			c.Listen, c.Advertise, c.Gossip, c.HTTP = "0.0.0.0:9400", "node1:9400", ":9401", "127.0.0.1:0"
			c.Join = []string{"a:1", "b:2"}
			c.Controllers = []ControllerAddr{{1, "node1:9400"}}
		}, ""},
		{"zero id", func(c *Config) { c.ID = 0 }, "ID"},
		{"negative id", func(c *Config) { c.ID = -3 }, "ID"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "DataDir"},
		{"blank data dir", func(c *Config) { c.DataDir = "  " }, "DataDir"},
		{"bad listen", func(c *Config) { c.Listen = "9400" }, "Listen"},
		{"bad advertise", func(c *Config) { c.Advertise = "host" }, "Advertise"},
		{"bad gossip", func(c *Config) { c.Gossip = "a:b" }, "Gossip"},
		{"bad http", func(c *Config) { c.HTTP = "a:70000" }, "HTTP"},
		{"bad join", func(c *Config) { c.Join = []string{"a:1", "nope"} }, "Join"},
		{"dial source not an IP", func(c *Config) { c.DialSource = "node1" }, "DialSource"},
		{"dial source unspecified", func(c *Config) { c.DialSource = "0.0.0.0" }, "DialSource"},
		{"bad controller id", func(c *Config) { c.Controllers = []ControllerAddr{{0, "a:1"}} }, "Controllers"},
		{"bad controller addr", func(c *Config) { c.Controllers = []ControllerAddr{{1, "a"}} }, "Controllers"},
		{"duplicate controller", func(c *Config) { c.Controllers = []ControllerAddr{{1, "a:1"}, {1, "b:1"}} }, "Controllers"},
		{"several candidates", func(c *Config) { c.Controllers = []ControllerAddr{{1, "a:1"}, {2, "b:1"}, {3, "c:1"}} }, ""},
		{"limits set", func(c *Config) {
			c.MaxBatchBytes, c.ConnRequestMemory, c.RequestMemory = 1<<20, 4<<20, 64<<20
			c.MaxConns, c.MaxConnsPerAddr, c.IdleTimeout = 100, 10, time.Second
		}, ""},
		{"batch limit too small", func(c *Config) { c.MaxBatchBytes = 100 }, "MaxBatchBytes"},
		{"batch limit too large", func(c *Config) { c.MaxBatchBytes = transport.MaxBatchBytesCeiling + 1 }, "MaxBatchBytes"},
		{"negative batch limit", func(c *Config) { c.MaxBatchBytes = -1 }, "MaxBatchBytes"},
		{"connection memory below a frame", func(c *Config) { c.ConnRequestMemory = storage.DefaultMaxBatchBytes }, "ConnRequestMemory"},
		{"connection memory below a larger frame", func(c *Config) {
			c.MaxBatchBytes, c.ConnRequestMemory = 16<<20, 8<<20
		}, "ConnRequestMemory"},
		{"node memory below a connection's", func(c *Config) { c.RequestMemory = 1 << 20 }, "RequestMemory"},
		{"negative node memory", func(c *Config) { c.RequestMemory = -1 }, "RequestMemory"},
		{"negative max conns", func(c *Config) { c.MaxConns = -1 }, "MaxConns"},
		{"per-address limit over the total", func(c *Config) { c.MaxConns, c.MaxConnsPerAddr = 10, 11 }, "MaxConnsPerAddr"},
		{"per-address limit over the default total", func(c *Config) { c.MaxConnsPerAddr = transport.DefaultMaxConns + 1 }, "MaxConnsPerAddr"},
		{"negative idle timeout", func(c *Config) { c.IdleTimeout = -time.Second }, "IdleTimeout"},
		{"negative retention interval", func(c *Config) { c.RetentionInterval = -time.Second }, "RetentionInterval"},
		{"negative console series interval", func(c *Config) { c.UISeriesInterval = -time.Second }, "UISeriesInterval"},
		{"topic defaults set", func(c *Config) {
			c.RetentionBytes, c.RetentionMs, c.SegmentBytes, c.SegmentMs = 1<<30, -1, 1<<20, 60000
			c.RetentionInterval = time.Second
		}, ""},
		{"unlimited retention", func(c *Config) { c.RetentionBytes, c.RetentionMs = -1, -1 }, ""},
		{"retention bytes -2", func(c *Config) { c.RetentionBytes = -2 }, "RetentionBytes"},
		{"retention ms -5", func(c *Config) { c.RetentionMs = -5 }, "RetentionMs"},
		{"segment bytes too small", func(c *Config) { c.SegmentBytes = 4096 }, "SegmentBytes"},
		{"segment bytes too large", func(c *Config) { c.SegmentBytes = 2 << 30 }, "SegmentBytes"},
		{"segment ms too small", func(c *Config) { c.SegmentMs = 10 }, "SegmentMs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantField == "" {
				assert.NoError(t, err)
				return
			}
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.wantField, fe.Field)
			assert.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
}

func TestConfigTopicDefaults(t *testing.T) {
	c := Config{ID: 4, DataDir: "d"}.withDefaults()
	d := c.topicDefaults()
	assert.Equal(t, int64(-1), d.RetentionBytes, "any size")
	assert.Equal(t, int64(7*24*time.Hour/time.Millisecond), d.RetentionMs, "seven days")
	assert.Equal(t, int64(128<<20), d.SegmentBytes)
	assert.Equal(t, int64(7*24*time.Hour/time.Millisecond), d.SegmentMs)
	require.NoError(t, d.Validate(), "the defaults are valid topic configuration")

	c = Config{ID: 4, DataDir: "d", RetentionBytes: 1 << 30, RetentionMs: -1, SegmentBytes: 1 << 20, SegmentMs: 1000}.withDefaults()
	d = c.topicDefaults()
	assert.Equal(t, [4]int64{1 << 30, -1, 1 << 20, 1000}, [4]int64{d.RetentionBytes, d.RetentionMs, d.SegmentBytes, d.SegmentMs})

	var fe *FieldError
	require.ErrorAs(t, Config{ID: 1, DataDir: "d", SegmentBytes: 5}.Validate(), &fe)
	assert.Equal(t, "want a number of bytes from 1048576 (1 MiB) to 1073741824 (1 GiB)", fe.Reason)
	assert.Equal(t, "5", fe.Value)
}

func TestConfigDefaults(t *testing.T) {
	c := Config{ID: 4, DataDir: "d"}.withDefaults()
	assert.Equal(t, DefaultListen, c.Listen)
	assert.Equal(t, DefaultListen, c.Advertise, "advertise defaults to listen")
	assert.Equal(t, DefaultGossip, c.Gossip)
	assert.Equal(t, DefaultHTTP, c.HTTP)
	assert.Equal(t, []ControllerAddr{{4, DefaultListen}}, c.Controllers, "a cluster of one")
	assert.NotNil(t, c.Logger)

	c = Config{ID: 2, DataDir: "d", Listen: "0.0.0.0:9410", Advertise: "node2:9410"}.withDefaults()
	assert.Equal(t, []ControllerAddr{{2, "node2:9410"}}, c.Controllers, "this node at its advertised address")
}

func TestLimitDefaults(t *testing.T) {
	require.Equal(t, storage.DefaultMaxBatchBytes, transport.DefaultMaxBatchBytes, "one default batch limit")
	c := Config{ID: 1, DataDir: "d"}.withDefaults()
	assert.Equal(t, storage.DefaultMaxBatchBytes, c.MaxBatchBytes)
	assert.Equal(t, c.MaxBatchBytes, c.Log.MaxBatchBytes, "the logs take the batch limit")
	assert.Equal(t, int64(2*(4<<20+64<<10)), c.ConnRequestMemory, "two frames")
	assert.Equal(t, int64(256<<20), c.RequestMemory)
	assert.Equal(t, 4096, c.MaxConns)
	assert.Equal(t, 1024, c.MaxConnsPerAddr)
	assert.Equal(t, 2*time.Minute, c.IdleTimeout)

	// A larger batch limit takes the memory defaults along.
	c = Config{ID: 1, DataDir: "d", MaxBatchBytes: 200 << 20, Log: storage.Options{MaxBatchBytes: 1}}.withDefaults()
	assert.Equal(t, 200<<20, c.Log.MaxBatchBytes)
	assert.Equal(t, int64(2*(200<<20+64<<10)), c.ConnRequestMemory)
	assert.Equal(t, c.ConnRequestMemory, c.RequestMemory)
	assert.NoError(t, Config{ID: 1, DataDir: "d", MaxBatchBytes: 200 << 20}.Validate())

	c = Config{ID: 1, DataDir: "d", MaxConns: 10}.withDefaults()
	assert.Equal(t, 10, c.MaxConnsPerAddr, "the per-address default is at most the total")
}

// Named RPC listeners: the first is the nodes' own (Listen and Advertise
// become its addresses), every one is advertised by name; a bare
// HOST:PORT stays as it was, and what a client could not dial is refused
// naming the field.
func TestNamedRPCListeners(t *testing.T) {
	base := Config{ID: 1, DataDir: "/d"}
	c := base
	c.Listen = "internal://0.0.0.0:9400,external://0.0.0.0:19400"
	c.Advertise = "internal://node1:9400,external://localhost:19400"
	require.NoError(t, c.Validate())
	d := c.withDefaults()
	assert.Equal(t, "0.0.0.0:9400", d.Listen)
	assert.Equal(t, "node1:9400", d.Advertise)
	require.Len(t, d.rpcNamed, 2)
	assert.Equal(t, "external", d.rpcNamed[1].Name)
	n := &Node{cfg: d}
	assert.Equal(t, "external://localhost:19400,internal://node1:9400", n.rpcEndpoints())

	c = base
	c.Listen = "127.0.0.1:9400"
	require.NoError(t, c.Validate())
	d = c.withDefaults()
	assert.Equal(t, "127.0.0.1:9400", d.Advertise)
	assert.Empty(t, d.rpcNamed)
	assert.Empty(t, (&Node{cfg: d}).rpcEndpoints())

	for _, bad := range []struct{ listen, advertise, field, why string }{
		{"internal://0.0.0.0:9400", "", "Advertise", "binds every interface"},
		{"internal://127.0.0.1:9400", "external://h:1", "Advertise", "no listener of that name"},
		{"a://127.0.0.1:9400,b://127.0.0.1:9400", "", "Listen", "share port"},
		{"", "internal://h:9400", "Advertise", "no listener of that name"},
	} {
		c := base
		c.Listen, c.Advertise = bad.listen, bad.advertise
		err := c.Validate()
		var fe *FieldError
		require.ErrorAs(t, err, &fe, "%+v", bad)
		assert.Equal(t, bad.field, fe.Field, "%+v", bad)
		assert.Contains(t, fe.Reason, bad.why, "%+v", bad)
	}
}
