package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"gostream/security"
	"gostream/transport"
)

// gossip runs memberlist for this node. It only shows who is alive: nothing
// in the node decides anything from it.
type gossip struct {
	ml     *memberlist.Memberlist
	logger hclog.Logger
	self   *metaDelegate
	// keyring holds the gossip encryption keys; nil without
	// --gossip-key-file.
	keyring *memberlist.Keyring
	// cryptoLog bounds the lines of gossip that cannot be decrypted.
	cryptoLog *transport.RateLog
	// closing is set once leave begins: memberlist's goroutines then
	// meet their closed sockets, which is no error of anyone's.
	closing atomic.Bool

	mu struct {
		sync.Mutex
		members map[string]memberInfo
	}
}

// gossipMeta is what every node gossips about itself.
type gossipMeta struct {
	ID   int32  `json:"id"`
	RPC  string `json:"rpc"`
	HTTP string `json:"http"`
	// Root is the node's storage root id: two members with one broker id
	// are two processes, and the one the controller registered is the one
	// whose root it bound.
	Root string `json:"root,omitempty"`
	// Cluster is the cluster id of the node's root, "" for a new root.
	Cluster string `json:"cluster,omitempty"`
}

type memberInfo struct {
	meta   gossipMeta
	addr   string
	state  string
	update time.Time
}

// gossipMember is one member as shown to operators.
type gossipMember struct {
	BrokerID int32
	Gossip   string
	State    string // alive, suspect, dead, left
	RootID   string
}

// startGossip starts memberlist for this node, whose storage root has id
// root and belongs to cluster ("" for a new root). The member's name holds
// both the broker id and the root id, so a second process claiming a
// broker id shows as a member of its own rather than taking the name.
func startGossip(cfg Config, root, cluster string, logger hclog.Logger) (*gossip, error) {
	host, portText, err := net.SplitHostPort(cfg.Gossip)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, err
	}
	g := &gossip{logger: logger, self: &metaDelegate{}, cryptoLog: transport.NewRateLog(logger, 0)}
	g.mu.members = map[string]memberInfo{}
	g.self.mu.meta = gossipMeta{ID: cfg.ID, RPC: cfg.Advertise, HTTP: cfg.HTTP, Root: root, Cluster: cluster}
	// The autopilot derives the least time gossip needs to find a dead
	// node dead from these same LAN defaults (autopilot.GossipBound, in
	// docs/autopilot.md): a change of their timings changes that too.
	mc := memberlist.DefaultLANConfig()
	mc.Name = fmt.Sprintf("broker-%d-%.8s", cfg.ID, root)
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = host, port
	if host == "" || host == "0.0.0.0" || host == "::" {
		mc.AdvertiseAddr = ""
	}
	mc.Delegate = g.self
	mc.Events = g
	mc.Alive = g
	mc.Merge = g
	mc.Logger = log.New(memberlistLog{g: g, w: logger.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true})}, "", 0)
	if cfg.Security.GossipKeyFile != "" {
		keys, err := security.LoadGossipKeys(cfg.Security.GossipKeyFile)
		if err != nil {
			return nil, err
		}
		g.keyring, err = memberlist.NewKeyring(keys, keys[0])
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", security.ErrGossipKeys, cfg.Security.GossipKeyFile, err)
		}
		// Encrypted and verified both ways: a member without the key
		// neither reads the view nor enters it.
		mc.Keyring, mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = g.keyring, true, true
	}
	mc.LogOutput = nil
	if src := net.ParseIP(cfg.DialSource); src != nil {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{host}, BindPort: port, Logger: mc.Logger})
		if err != nil {
			return nil, fmt.Errorf("%w on gossip address %s: %w", ErrCannotListen, cfg.Gossip, err)
		}
		if port == 0 {
			mc.BindPort = nt.GetAutoBindPort()
			mc.AdvertisePort = mc.BindPort
		}
		mc.Transport = &sourceTransport{NetTransport: nt, src: &net.TCPAddr{IP: src}}
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("%w on gossip address %s: %w", ErrCannotListen, cfg.Gossip, err)
	}
	g.ml = ml
	return g, nil
}

// sourceTransport is memberlist's own transport with its stream
// connections (state exchange on join and push/pull) dialed from a given
// source address, as Config.DialSource asks. Its packets already leave from
// the bound UDP socket, so from the gossip address.
type sourceTransport struct {
	*memberlist.NetTransport
	src *net.TCPAddr
}

func (t *sourceTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *sourceTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, LocalAddr: t.src}
	return d.Dial("tcp", a.Addr)
}

// join tries the seeds; it returns how many it reached.
func (g *gossip) join(seeds []string) int {
	if len(seeds) == 0 {
		return 0
	}
	n, err := g.ml.Join(seeds)
	if err != nil && n == 0 {
		g.logger.Debug("gossip join found no seed yet", "seeds", fmt.Sprint(seeds), "err", err)
	}
	return n
}

// members lists every member seen, with its current state.
func (g *gossip) members() []gossipMember {
	// Members lists only those not known dead or gone; a member it lists
	// is alive unless memberlist suspects it.
	live := map[string]string{}
	for _, n := range g.ml.Members() {
		st := "alive"
		if n.State == memberlist.StateSuspect {
			st = "suspect"
		}
		live[n.Name] = st
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]gossipMember, 0, len(g.mu.members))
	for name, m := range g.mu.members {
		st := m.state
		if s, ok := live[name]; ok {
			st = s
		}
		out = append(out, gossipMember{BrokerID: m.meta.ID, Gossip: m.addr, State: st, RootID: m.meta.Root})
	}
	slices.SortFunc(out, func(a, b gossipMember) int { return int(a.BrokerID - b.BrokerID) })
	return out
}

func (g *gossip) note(n *memberlist.Node, state string) {
	var meta gossipMeta
	if err := json.Unmarshal(n.Meta, &meta); err != nil {
		g.logger.Warn("gossip member with unreadable meta", "member", n.Name, "err", err)
		return
	}
	g.mu.Lock()
	g.mu.members[n.Name] = memberInfo{meta: meta, addr: n.Address(), state: state, update: time.Now()}
	g.mu.Unlock()
}

// rpcAddrs returns the RPC address every live member gossips, by broker
// id, for a restore of the controller's metadata to find the copies that
// brokers hold when the controller's own file lists none of them.
func (g *gossip) rpcAddrs() map[int32]string {
	live := map[string]bool{}
	for _, n := range g.ml.Members() {
		live[n.Name] = true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[int32]string{}
	for name, m := range g.mu.members {
		if live[name] && m.meta.RPC != "" {
			out[m.meta.ID] = m.meta.RPC
		}
	}
	return out
}

// refuse returns why a member may not be in this node's view: it gossips
// another cluster's id. Gossip shows who is alive; a node of another
// cluster (a second controller started with a new root and pointed at
// this cluster's seeds, say) must not show as one of ours.
func (g *gossip) refuse(n *memberlist.Node) error {
	var meta gossipMeta
	if err := json.Unmarshal(n.Meta, &meta); err != nil {
		return fmt.Errorf("member %s has unreadable meta: %v", n.Name, err)
	}
	if mine := g.self.meta().Cluster; mine != "" && meta.Cluster != "" && meta.Cluster != mine {
		return fmt.Errorf("member %s (broker %d at %s) belongs to cluster %s, this node to cluster %s", n.Name, meta.ID, n.Address(), meta.Cluster, mine)
	}
	return nil
}

// setCluster records the cluster id this node learned at registration, so
// that it gossips it and keeps other clusters' members out. A broker joins
// gossip only after it learned it (see Node.serve).
func (g *gossip) setCluster(id string) {
	if g.self.setCluster(id) {
		if err := g.ml.UpdateNode(time.Second); err != nil {
			g.logger.Debug("announce the cluster id", "err", err)
		}
	}
}

// NotifyAlive implements memberlist.AliveDelegate.
func (g *gossip) NotifyAlive(n *memberlist.Node) error {
	err := g.refuse(n)
	if err != nil {
		g.logger.Warn("refusing a member", "member", n.Name, "err", err)
	}
	return err
}

// NotifyMerge implements memberlist.MergeDelegate: a join that would merge
// this node's view with another cluster's is refused.
func (g *gossip) NotifyMerge(peers []*memberlist.Node) error {
	for _, n := range peers {
		if err := g.refuse(n); err != nil {
			g.logger.Warn("refusing to merge with another cluster", "err", err)
			return err
		}
	}
	return nil
}

// NotifyJoin implements memberlist.EventDelegate.
func (g *gossip) NotifyJoin(n *memberlist.Node) {
	g.note(n, "alive")
	g.logger.Info("member joined", "member", n.Name, "addr", n.Address())
}

// NotifyLeave implements memberlist.EventDelegate.
func (g *gossip) NotifyLeave(n *memberlist.Node) {
	// memberlist calls this for a member it declared dead or that left.
	state := "dead"
	if n.State == memberlist.StateLeft {
		state = "left"
	}
	g.note(n, state)
	g.logger.Info("member gone", "member", n.Name, "state", state)
}

// NotifyUpdate implements memberlist.EventDelegate.
func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.note(n, "alive") }

// memberlistLog passes memberlist's log lines to the node's logger, but
// for the errors of sockets closed by a shutdown, which go to debug.
type memberlistLog struct {
	g *gossip
	w io.Writer
}

func (m memberlistLog) Write(p []byte) (int, error) {
	if m.g.closing.Load() && bytes.Contains(p, []byte("use of closed network connection")) {
		m.g.logger.Debug("memberlist after shutdown", "line", strings.TrimSpace(string(p)))
		return len(p), nil
	}
	// A member with another gossip key (or none) sends a message a second:
	// one line a minute says so, with the count.
	if bytes.Contains(p, []byte("decrypt")) || bytes.Contains(p, []byte("not encrypted")) {
		m.g.cryptoLog.Warn("gossip-crypto", "gossip that this node's keys cannot read (a member with another --gossip-key-file, or none); refused",
			"line", strings.TrimSpace(string(p)))
		return len(p), nil
	}
	return m.w.Write(p)
}

// reloadKeys makes the keyring what the keys file says now: its keys
// installed, its first key the one that sends, and the keys it no longer
// lists removed (docs/security.md: rotation).
func (g *gossip) reloadKeys(path string) error {
	keys, err := security.LoadGossipKeys(path)
	if err != nil {
		return err
	}
	if g.keyring == nil {
		return fmt.Errorf("%w: %s: gossip encryption cannot be turned on without a restart", security.ErrGossipKeys, path)
	}
	for _, k := range keys {
		if err := g.keyring.AddKey(k); err != nil {
			return fmt.Errorf("%w: %s: %v", security.ErrGossipKeys, path, err)
		}
	}
	if err := g.keyring.UseKey(keys[0]); err != nil {
		return fmt.Errorf("%w: %s: %v", security.ErrGossipKeys, path, err)
	}
	for _, old := range g.keyring.GetKeys() {
		if !slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, old) }) {
			if err := g.keyring.RemoveKey(old); err != nil {
				return fmt.Errorf("%w: %s: %v", security.ErrGossipKeys, path, err)
			}
		}
	}
	g.logger.Info("gossip keys reloaded", "keys", len(keys))
	return nil
}

// leave announces that this node is going and stops gossip.
func (g *gossip) leave() {
	g.closing.Store(true)
	if err := g.ml.Leave(time.Second); err != nil {
		g.logger.Debug("gossip leave", "err", err)
	}
	g.ml.Shutdown()
}

// metaDelegate gossips this node's meta and nothing else.
type metaDelegate struct {
	mu struct {
		sync.Mutex
		meta gossipMeta
	}
}

func (m *metaDelegate) meta() gossipMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.meta
}

// setCluster sets the cluster id in the meta; it reports whether it
// changed.
func (m *metaDelegate) setCluster(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.meta.Cluster == id {
		return false
	}
	m.mu.meta.Cluster = id
	return true
}

func (m *metaDelegate) NodeMeta(limit int) []byte {
	b, err := json.Marshal(m.meta())
	if err != nil || len(b) > limit {
		return nil
	}
	return b
}
func (*metaDelegate) NotifyMsg([]byte)                {}
func (*metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (*metaDelegate) LocalState(bool) []byte          { return nil }
func (*metaDelegate) MergeRemoteState([]byte, bool)   {}
