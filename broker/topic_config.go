package broker

import (
	"gostream/metadata"
	"gostream/storage"
	"gostream/transport"
)

// A topic's configuration (retention.bytes, retention.ms, segment.bytes,
// segment.ms) is cluster metadata: metadata.Topic.Config holds the keys
// the topic sets itself, and every node fills in the others from its own
// defaults (Config.RetentionBytes and the rest). The controller changes it
// like any metadata, persisted and then pushed; each broker opens a
// replica's log with the topic's policy and, when metadata that changes it
// arrives, gives the open logs the new one (applyTopicConfig).

// TopicConfigValues lists every key of t's configuration with the value
// this node applies: the topic's own, or this node's default.
func (b *Replicas) TopicConfigValues(t *metadata.Topic) []transport.TopicConfigValue {
	eff := t.Config.Over(b.defaults)
	keys := metadata.ConfigKeys()
	out := make([]transport.TopicConfigValue, len(keys))
	for i, k := range keys {
		v, _ := eff.Get(k)
		_, own := t.Config[k]
		out[i] = transport.TopicConfigValue{Key: k, Value: v, Default: !own}
	}
	return out
}

// policyOf is the storage policy of t's replicas on this node.
func (b *Replicas) policyOf(t *metadata.Topic) storage.Policy {
	return t.Config.Over(b.defaults).Policy()
}

// setPolicy gives opts, for a replica of topic about to be opened, the
// topic's policy under the metadata held.
func (b *Replicas) setPolicy(opts *storage.Options, topic string) {
	cfg := metadata.TopicConfig(nil)
	if meta := b.meta.Load(); meta != nil {
		if t := meta.Topic(topic); t != nil {
			cfg = t.Config
		}
	}
	p := cfg.Over(b.defaults).Policy()
	opts.SegmentBytes, opts.SegmentAge, opts.RetentionBytes, opts.RetentionAge = p.SegmentBytes, p.SegmentAge, p.RetentionBytes, p.RetentionAge
}

// applyTopicConfig gives an open replica's log the policy of its topic's
// configuration, if it changed: segments roll by it from the next append,
// and the next retention run keeps what it says.
func (b *Replicas) applyTopicConfig(r *Replica, t *metadata.Topic) {
	want := b.policyOf(t)
	if r.Log.Policy() == want {
		return
	}
	if err := r.Log.SetPolicy(want); err != nil {
		// The metadata was validated; a policy storage refuses is a bug.
		b.logger.Error("topic configuration not applied", "topic", t.Name, "partition", r.Part.Index, "err", err)
		return
	}
	b.logger.Info("topic configuration applied", "topic", t.Name, "partition", r.Part.Index,
		"segment_bytes", want.SegmentBytes, "segment_age", want.SegmentAge,
		"retention_bytes", want.RetentionBytes, "retention_age", want.RetentionAge)
}
