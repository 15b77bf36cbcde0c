package testcluster

import (
	"fmt"
	"path/filepath"
)

// Impostor returns a node slot that claims broker id id with its own
// addresses and the data directory dataDir (empty: a new directory of its
// own): another process started with a used --id, as an operator's slip
// or a restored copy of a data directory would start one. It is not one of
// c.Nodes; start it with StartImpostor, stop it with Kill or Stop.
func (c *Cluster) Impostor(id int32, dataDir string) (*Node, error) {
	c.impostors++
	name := fmt.Sprintf("impostor%d-%d", id, c.impostors)
	if dataDir == "" {
		dataDir = filepath.Join(c.cfg.Dir, name)
	}
	n := &Node{ID: id, DataDir: dataDir, bin: c.Bins.Node,
		logPath: filepath.Join(c.cfg.Dir, name+".log"), logf: c.cfg.Logf,
		Args: append([]string(nil), c.cfg.NodeArgs...), host: c.cfg.Host}
	if c.cfg.Netns {
		// The impostor shares broker id's host and so its network faults.
		n.host = NodeHost(id)
		n.Args = append(n.Args, "--dial-source", n.host)
	}
	if err := c.freshAddrs(n); err != nil {
		return nil, err
	}
	return n, nil
}

// StartImpostor starts an impostor with the cluster's controller and
// gossip seeds, without waiting for it to be healthy: the controller is
// expected to refuse it.
func (c *Cluster) StartImpostor(n *Node) error {
	var join []string
	for _, o := range c.Nodes {
		join = append(join, o.Gossip)
	}
	return n.Start(c.Controller(), join)
}
