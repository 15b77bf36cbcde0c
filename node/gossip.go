package node

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// gossip runs memberlist for this node. It only shows who is alive: nothing
// in the node decides anything from it.
type gossip struct {
	ml     *memberlist.Memberlist
	logger hclog.Logger

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
}

func startGossip(cfg Config, logger hclog.Logger) (*gossip, error) {
	host, portText, err := net.SplitHostPort(cfg.Gossip)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, err
	}
	g := &gossip{logger: logger}
	g.mu.members = map[string]memberInfo{}
	meta, err := json.Marshal(gossipMeta{ID: cfg.ID, RPC: cfg.Advertise, HTTP: cfg.HTTP})
	if err != nil {
		return nil, err
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = fmt.Sprintf("broker-%d", cfg.ID)
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = host, port
	if host == "" || host == "0.0.0.0" || host == "::" {
		mc.AdvertiseAddr = ""
	}
	mc.Delegate = metaDelegate(meta)
	mc.Events = g
	mc.Logger = logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
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
		out = append(out, gossipMember{BrokerID: m.meta.ID, Gossip: m.addr, State: st})
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

// NotifyJoin implements memberlist.EventDelegate.
func (g *gossip) NotifyJoin(n *memberlist.Node) {
	g.note(n, "alive")
	g.logger.Info("gossip: member joined", "member", n.Name, "addr", n.Address())
}

// NotifyLeave implements memberlist.EventDelegate.
func (g *gossip) NotifyLeave(n *memberlist.Node) {
	// memberlist calls this for a member it declared dead or that left.
	state := "dead"
	if n.State == memberlist.StateLeft {
		state = "left"
	}
	g.note(n, state)
	g.logger.Info("gossip: member gone", "member", n.Name, "state", state)
}

// NotifyUpdate implements memberlist.EventDelegate.
func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.note(n, "alive") }

// leave announces that this node is going and stops gossip.
func (g *gossip) leave() {
	if err := g.ml.Leave(time.Second); err != nil {
		g.logger.Debug("gossip leave", "err", err)
	}
	g.ml.Shutdown()
}

// metaDelegate gossips a fixed node meta and nothing else.
type metaDelegate []byte

func (m metaDelegate) NodeMeta(limit int) []byte {
	if len(m) > limit {
		return nil
	}
	return m
}
func (metaDelegate) NotifyMsg([]byte)                {}
func (metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (metaDelegate) LocalState(bool) []byte          { return nil }
func (metaDelegate) MergeRemoteState([]byte, bool)   {}
