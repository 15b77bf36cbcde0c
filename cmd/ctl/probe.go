package main

import (
	"gostream/client"
)

// newReplicaProber is the prober topic describe asks every replica with:
// each request under a short deadline (--timeout bounds it further), and
// a broker that once did not answer is not asked again.
func newReplicaProber(cl *client.Client, g globals) *client.Prober {
	return cl.NewProber(g.timeout)
}

// maxConcurrentProbes bounds the requests topic describe has in flight at
// once.
const maxConcurrentProbes = 16
