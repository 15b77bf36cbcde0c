package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/metadata"
	"gostream/transport"
)

// principalHeader carries a test request's principal.
const principalHeader = "X-Test-Principal"

// testServer is a console with authorization on (admin may do anything,
// others what acls allow) whose survey answers seeded rounds, and whose
// node cannot reach the cluster: a request that got as far as the
// cluster answers 503, and clientCalls counts them.
func testServer(t *testing.T, acls ...metadata.ACL) (*Server, *atomic.Int64) {
	var clientCalls atomic.Int64
	s := New(Config{
		NodeID:   1,
		Security: true,
		Client: func(context.Context) (*client.Client, error) {
			clientCalls.Add(1)
			return nil, errors.New("no cluster in this test")
		},
		Principal: func(r *http.Request) string { return r.Header.Get(principalHeader) },
		Authorize: func(p string, op metadata.Operation, rt metadata.ResourceType, name string) error {
			if p == "admin" || metadata.Allows(acls, p, op, rt, name) {
				return nil
			}
			return fmt.Errorf("%w: %s may not %s %s %q", transport.ErrUnauthorized, p, op, rt, name)
		},
	})
	// One round: orders/0 holds offsets 1 to 109, orders/1 0 to 104, and
	// g committed orders/0 at 3 (its lag 107 + 105).
	s.survey.interval = time.Hour
	s.survey.round = func(context.Context) (*snapshot, error) { return seededRound(time.Now(), 110, 105, false), nil }
	t.Cleanup(s.Close)
	return s, &clientCalls
}

func call(t *testing.T, s *Server, principal, method, path, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "http://node1:9402"+path, strings.NewReader(body))
	r.Header.Set(principalHeader, principal)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// change sends a change as the console's page does: its header, a JSON
// body, from the node's own origin.
func change(t *testing.T, s *Server, principal, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	return call(t, s, principal, method, path, body, ConsoleHeader, "1", "Content-Type", "application/json", "Origin", "http://node1:9402")
}

func decode[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v), w.Body.String())
	return v
}

func acl(principal string, rt metadata.ResourceType, name string, op metadata.Operation) metadata.ACL {
	return metadata.ACL{Principal: principal, Resource: rt, Name: name, Pattern: metadata.PatternLiteral, Operation: op}
}

// The lists answer from the survey, leave out what the principal may not
// describe, and say how old they are.
func TestListsFromTheSurvey(t *testing.T) {
	s, clientCalls := testServer(t,
		acl("alice", metadata.ResourceTopic, "orders", metadata.OpDescribe),
		acl("bob", metadata.ResourceGroup, "g", metadata.OpDescribe),
		acl("bob", metadata.ResourceStream, "/logs/a", metadata.OpRead),
	)

	w := call(t, s, "admin", "GET", "/ui/api/topics", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	topics := decode[Topics](t, w)
	assert.NotZero(t, topics.At)
	require.Len(t, topics.Topics, 2)
	assert.Equal(t, "__ds.s", topics.Topics[0].Name)
	assert.True(t, topics.Topics[0].Internal)
	assert.Equal(t, "/logs/a", topics.Topics[0].Stream)
	orders := topics.Topics[1]
	assert.Equal(t, TopicSummary{Name: "orders", Partitions: 2, ReplicationFactor: 2, Bytes: 300, Records: 109 + 105,
		Groups: []GroupLag{{Group: "g", Lag: 107 + 105}}}, orders, "no rate after one round")
	assert.Contains(t, topics.Unavailable, "group k: "+transport.ErrCoordinatorLoading.Error(), "the cluster's describer sees what did not answer")

	// alice may describe orders alone: no stream's topic, no group, and
	// not what did not answer.
	topics = decode[Topics](t, call(t, s, "alice", "GET", "/ui/api/topics", ""))
	require.Len(t, topics.Topics, 1)
	assert.Equal(t, "orders", topics.Topics[0].Name)
	assert.Empty(t, topics.Topics[0].Groups)
	assert.Empty(t, topics.Unavailable)
	assert.Empty(t, decode[Groups](t, call(t, s, "alice", "GET", "/ui/api/groups", "")).Groups)
	assert.Empty(t, decode[Streams](t, call(t, s, "alice", "GET", "/ui/api/streams", "")).Streams)

	// bob may describe group g, but no topic: g's lag counts none.
	groups := decode[Groups](t, call(t, s, "bob", "GET", "/ui/api/groups", ""))
	require.Len(t, groups.Groups, 1)
	g := groups.Groups[0]
	assert.Equal(t, "g", g.Name)
	assert.Equal(t, "native", g.Protocol)
	require.NotNil(t, g.Lag)
	assert.Zero(t, *g.Lag)
	streams := decode[Streams](t, call(t, s, "bob", "GET", "/ui/api/streams", ""))
	require.Len(t, streams.Streams, 1)
	forty, four, three := int64(40), int64(4), 3
	assert.Equal(t, Stream{Path: "/logs/a", Topic: "__ds.s", ContentType: "text/plain", Bytes: &forty, Records: &four, Readers: &three},
		streams.Streams[0], "its readers on both brokers")

	groups = decode[Groups](t, call(t, s, "admin", "GET", "/ui/api/groups", ""))
	require.Len(t, groups.Groups, 2)
	assert.Equal(t, int64(107+105), *groups.Groups[0].Lag)
	assert.Nil(t, groups.Groups[1].Lag, "k's coordinator did not answer: its lag is unknown, not 0")

	// The lag history: admin sees g over orders; bob sees g, but none of
	// its topics, so no point.
	lag := decode[LagHistory](t, call(t, s, "admin", "GET", "/ui/api/lag", ""))
	require.NotEmpty(t, lag.Times)
	require.Len(t, lag.Groups, 1)
	assert.Equal(t, "g", lag.Groups[0].Group)
	require.Len(t, lag.Groups[0].Lag, 1)
	require.NotNil(t, lag.Groups[0].Lag[0])
	assert.Equal(t, int64(107+105), *lag.Groups[0].Lag[0])
	assert.Empty(t, decode[LagHistory](t, call(t, s, "bob", "GET", "/ui/api/lag", "")).Groups)

	assert.Zero(t, clientCalls.Load(), "the lists made no call of their own to the cluster")
}

// A stream's readers are summed over every broker: with one broker's
// status missing from the round they are unknown (null), not the others'
// count, while its size, told by its leader, stays known.
func TestStreamReadersUnknownWhenABrokerIsSilent(t *testing.T) {
	s, _ := testServer(t)
	s.survey.round = func(context.Context) (*snapshot, error) { return seededRound(time.Now(), 110, 105, true), nil }
	streams := decode[Streams](t, call(t, s, "admin", "GET", "/ui/api/streams", ""))
	require.Len(t, streams.Streams, 1)
	assert.Nil(t, streams.Streams[0].Readers)
	require.NotNil(t, streams.Streams[0].Bytes)
	assert.Equal(t, int64(40), *streams.Streams[0].Bytes)
	assert.Contains(t, call(t, s, "admin", "GET", "/ui/api/streams", "").Body.String(), `"readers":null`)
}

// The lists say how long the survey's round took to ask the cluster,
// the figure to watch as a cluster grows.
func TestListsSayHowLongTheRoundTook(t *testing.T) {
	s, _ := testServer(t)
	const took = 30 * time.Millisecond
	s.survey.round = func(context.Context) (*snapshot, error) {
		time.Sleep(took) // a round that asks a slow cluster
		return seededRound(time.Now(), 110, 105, false), nil
	}
	topics := decode[Topics](t, call(t, s, "admin", "GET", "/ui/api/topics", ""))
	assert.GreaterOrEqual(t, topics.RoundMs, took.Milliseconds())
	assert.Less(t, topics.RoundMs, roundTimeout.Milliseconds())
	groups := decode[Groups](t, call(t, s, "admin", "GET", "/ui/api/groups", ""))
	assert.Equal(t, topics.RoundMs, groups.RoundMs, "the same round")
	streams := decode[Streams](t, call(t, s, "admin", "GET", "/ui/api/streams", ""))
	assert.Equal(t, topics.RoundMs, streams.RoundMs)
}

// Pages that ask the cluster check the principal first: refused is 403,
// whether the topic or group exists or not, and nothing is asked.
func TestRefusedBeforeAsking(t *testing.T) {
	s, clientCalls := testServer(t, acl("alice", metadata.ResourceTopic, "orders", metadata.OpDescribe))
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/ui/api/overview", ""},
		{"GET", "/ui/api/topics/payments", ""},
		{"GET", "/ui/api/topics/no-such-topic", ""},
		{"GET", "/ui/api/groups/g", ""},
		{"POST", "/ui/api/groups/g/reset-offsets", `{"topic":"orders","to":"earliest"}`},
		{"DELETE", "/ui/api/groups/g", ""},
		{"GET", "/ui/api/acls", ""},
		{"POST", "/ui/api/acls", `{"principal":"alice","resource":"cluster","operation":"alter"}`},
		{"DELETE", "/ui/api/acls", `{"principal":"alice","resource":"topic","name":"orders","operation":"describe"}`},
		{"GET", "/ui/api/history", ""},
	} {
		w := change(t, s, "alice", tt.method, tt.path, tt.body)
		assert.Equal(t, http.StatusForbidden, w.Code, "%s %s: %s", tt.method, tt.path, w.Body.String())
		assert.Equal(t, transport.CodeUnauthorized.String(), decode[apiError](t, w).Code, "%s %s", tt.method, tt.path)
	}
	assert.Zero(t, clientCalls.Load())
	// alice may describe orders: its page goes on to ask the cluster
	// (which this test's node cannot reach).
	assert.Equal(t, http.StatusServiceUnavailable, call(t, s, "alice", "GET", "/ui/api/topics/orders", "").Code)
	assert.Equal(t, int64(1), clientCalls.Load())
}

// A change from elsewhere, or with a bad body, is refused before the
// cluster is asked: 403 or 400 with the reason.
func TestBadChangesAreRefusedBeforeAsking(t *testing.T) {
	s, clientCalls := testServer(t)
	entry := `{"principal":"alice","resource":"topic","name":"orders","operation":"read"}`

	assert.Equal(t, http.StatusForbidden, call(t, s, "admin", "POST", "/ui/api/acls", entry, "Content-Type", "application/json").Code,
		"no console header")
	assert.Equal(t, http.StatusForbidden, call(t, s, "admin", "POST", "/ui/api/acls", entry,
		ConsoleHeader, "1", "Content-Type", "application/json", "Origin", "https://evil.example").Code, "another origin")
	assert.Equal(t, http.StatusForbidden, call(t, s, "admin", "DELETE", "/ui/api/groups/g", "",
		ConsoleHeader, "1", "Sec-Fetch-Site", "cross-site").Code, "another site")

	for _, tt := range []struct{ path, body, want string }{
		{"/ui/api/acls", `{"principal":"alice","resource":"topic","name":"orders","operation":"fly"}`, "operation"},
		{"/ui/api/acls", `{"principal":"alice","resource":"planet","name":"x","operation":"read"}`, "resource"},
		{"/ui/api/acls", `{"principal":"","resource":"topic","name":"x","operation":"read"}`, "principal"},
		{"/ui/api/acls", `{"principal":"alice","resource":"cluster","name":"x","operation":"alter"}`, "cluster"},
		{"/ui/api/acls", `{"principal":"alice","resource":"topic","name":"x","operation":"read","extra":1}`, "unknown field"},
		{"/ui/api/acls", `{"principal":"alice"} {}`, "more than one"},
		{"/ui/api/acls", `not json`, "body"},
		{"/ui/api/groups/g/reset-offsets", `{"to":"earliest"}`, "topic"},
		{"/ui/api/groups/g/reset-offsets", `{"topic":"../x","to":"earliest"}`, "topic name"},
		{"/ui/api/groups/g/reset-offsets", `{"topic":"t","to":"yesterday"}`, "want earliest"},
		{"/ui/api/groups/g/reset-offsets", `{"topic":"t","to":"offset"}`, "needs a value"},
		{"/ui/api/groups/g/reset-offsets", `{"topic":"t","to":"offset","value":-1}`, "0 or more"},
		{"/ui/api/groups/g/reset-offsets", `{"topic":"t","to":"time","value":-5}`, "Unix milliseconds"},
		{"/ui/api/groups/g/reset-offsets", `{"topic":"t","to":"latest","value":3}`, "takes no value"},
		{"/ui/api/groups/g/reset-offsets", `{"topic":"t","to":"earliest","partitions":[-1]}`, "partition -1"},
		{"/ui/api/groups/g/reset-offsets", `{"topic":"t","to":"earliest","partitions":[4294967296]}`, "body"},
	} {
		w := change(t, s, "admin", "POST", tt.path, tt.body)
		assert.Equal(t, http.StatusBadRequest, w.Code, "%s %s: %s", tt.path, tt.body, w.Body.String())
		assert.Contains(t, decode[apiError](t, w).Error, tt.want, "%s %s", tt.path, tt.body)
	}
	assert.Zero(t, clientCalls.Load(), "nothing was sent")

	w := call(t, s, "admin", "GET", "/ui/api/history?limit=0", "")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, decode[apiError](t, w).Error, "limit")
}

func TestListenersOf(t *testing.T) {
	assert.Equal(t, []Listener{}, listenersOf(""))
	assert.Equal(t, []Listener{{"EXTERNAL", "kafka.example:9093"}, {"INTERNAL", "10.0.0.1:9092"}},
		listenersOf("EXTERNAL://kafka.example:9093,INTERNAL://10.0.0.1:9092"))
}

func TestAutopilotActionsNewestFirst(t *testing.T) {
	ev := func(sec int64, who string, action transport.Action) client.HistoryEvent {
		return client.HistoryEvent{Time: time.Unix(sec, 0), Requester: who, ChangeResult: client.ChangeResult{Action: action, Partition: -1}}
	}
	events := []client.HistoryEvent{
		ev(1, "autopilot:old", transport.ActionFailover),
		ev(2, "alice", transport.ActionElectLeader),
		ev(3, "ops-bot", transport.ActionRecover),
		ev(4, "autopilot:new", transport.ActionDropFollower),
	}
	got := autopilotActionsOf(events, "ops-bot")
	require.Len(t, got, 3)
	assert.Equal(t, []string{"autopilot:new", "ops-bot", "autopilot:old"}, []string{got[0].Requester, got[1].Requester, got[2].Requester})
	assert.Equal(t, int64(4000), got[0].Time)
	assert.Equal(t, []int32{}, got[0].OldActive, "lists are [] in JSON, not null")
}

// The console's files and its API share /ui/: the page answers GET, the
// API's unknown paths are JSON 404s, not the page.
func TestRoutes(t *testing.T) {
	s, _ := testServer(t)
	w := call(t, s, "", "GET", "/ui/", "")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), "<html")
	assert.Equal(t, "DENY", w.Header().Get("X-Frame-Options"))
	assert.Equal(t, http.StatusMethodNotAllowed, change(t, s, "", "POST", "/ui/", "{}").Code)
	w = call(t, s, "admin", "GET", "/ui/api/nothing", "")
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Equal(t, "NotFound", decode[apiError](t, w).Code)
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	w = call(t, s, "alice", "GET", "/ui/api/whoami", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, Whoami{Principal: "alice", Security: true, Node: 1}, decode[Whoami](t, w))
}
