package testcluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"gostream/client"
)

// recreateTopic is the topic that topic-recreate deletes and creates again
// under its own producers, beside the workload's topic.
const (
	recreateTopic      = "chaos-recreate"
	recreatePartitions = 2
)

// sideAck is one record a side producer had acknowledged.
type sideAck struct {
	partition int32
	offset    int64
	value     string
}

// sideProducer writes to one incarnation of recreateTopic: a client of its
// own, which pins the incarnation it first sees, tags every value with gen.
type sideProducer struct {
	gen    int
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	acks  []sideAck
	fails int
	err   string // the last error
}

func (r *run) startSide(gen int) (*sideProducer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	cl, err := r.client(ctx)
	cancel()
	if err != nil {
		return nil, err
	}
	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 3 * time.Second, Linger: -1})
	if err != nil {
		cl.Close()
		return nil, err
	}
	pctx, pcancel := context.WithCancel(context.Background())
	s := &sideProducer{gen: gen, cancel: pcancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer cl.Close()
		defer p.Close()
		for seq := 0; pctx.Err() == nil; seq++ {
			part := int32(seq % recreatePartitions)
			value := fmt.Sprintf("inc%d-%d", gen, seq)
			sctx, cancel := context.WithTimeout(pctx, 3*time.Second)
			ack, err := p.Send(sctx, client.ProducerRecord{Topic: recreateTopic, Partition: part, ManualPartition: true, Value: []byte(value)})
			cancel()
			s.mu.Lock()
			if err != nil {
				s.fails++
				s.err = err.Error()
			} else {
				s.acks = append(s.acks, sideAck{partition: ack.Partition, offset: ack.Offset, value: value})
			}
			s.mu.Unlock()
			if err != nil {
				sleepCtx(pctx, 50*time.Millisecond)
			}
		}
	}()
	return s, nil
}

func (s *sideProducer) stop() {
	s.cancel()
	<-s.done
}

func (s *sideProducer) snapshot() ([]sideAck, int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sideAck(nil), s.acks...), s.fails, s.err
}

// topicRecreate deletes recreateTopic and creates it again while a
// producer writes to it, as an operator does who reuses a name. The old
// producer's client knows the old incarnation; none of its writes may land
// in the new one (they fail with TopicRecreated), and every record the new
// incarnation's own producer had acknowledged must be read back from it at
// its offset. The workload's topic runs on beside it.
func (r *run) topicRecreate() error {
	create := []string{"topic", "create", recreateTopic, "--partitions", fmt.Sprint(recreatePartitions), "--replication-factor", "3"}
	if r.side == nil {
		if err := r.ctl(60*time.Second, create...); err != nil {
			return err
		}
		s, err := r.startSide(r.sideGen)
		if err != nil {
			return err
		}
		r.side = s
	}
	r.sleep(500, 1500)
	old := r.side
	if err := r.ctl(60*time.Second, "topic", "delete", recreateTopic); err != nil {
		return err
	}
	if err := r.ctl(60*time.Second, create...); err != nil {
		return err
	}
	r.sideGen++
	neu, err := r.startSide(r.sideGen)
	if err != nil {
		return err
	}
	r.side = neu
	r.say("topic %s deleted and created again (incarnation %d) while incarnation %d's producer writes", recreateTopic, r.sideGen, old.gen)
	r.sleep(1000, 2500)
	old.stop()
	oldAcks, oldFails, oldErr := old.snapshot()
	newAcks, _, _ := neu.snapshot()
	r.say("incarnation %d's producer: %d acknowledged, %d failed (last: %s); incarnation %d's: %d acknowledged so far",
		old.gen, len(oldAcks), oldFails, oldErr, neu.gen, len(newAcks))
	r.checkIncarnation(neu.gen, newAcks)
	return nil
}

// checkIncarnation reads recreateTopic from the start up to the highest
// acknowledged offset of acks on each partition, and checks that every
// record is incarnation gen's and that each acknowledged one is at its
// offset.
func (r *run) checkIncarnation(gen int, acks []sideAck) {
	want := map[int32]int64{} // partition -> offset to read up to (exclusive)
	at := map[int32]map[int64]string{}
	for p := int32(0); p < recreatePartitions; p++ {
		at[p] = map[int64]string{}
	}
	for _, a := range acks {
		want[a.partition] = max(want[a.partition], a.offset+1)
		at[a.partition][a.offset] = a.value
	}
	prefix := fmt.Sprintf("inc%d-", gen)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := r.client(ctx)
	if err != nil {
		r.violation("topic-recreate: no client to read incarnation %d: %v", gen, err)
		return
	}
	defer cl.Close()
	for p, end := range want {
		read, err := readRange(ctx, cl, recreateTopic, p, end)
		if err != nil {
			r.violation("topic-recreate: partition %d of incarnation %d: read [0, %d): %v", p, gen, end, err)
			continue
		}
		bad := 0
		for off, v := range read {
			if !strings.HasPrefix(v, prefix) {
				if bad++; bad <= 3 {
					r.violation("topic-recreate: partition %d offset %d of incarnation %d holds %q, a record of another incarnation's producer", p, off, gen, v)
				}
			}
		}
		for off, v := range at[p] {
			if got, ok := read[off]; !ok || got != v {
				if bad++; bad <= 3 {
					r.violation("topic-recreate: partition %d offset %d of incarnation %d: acknowledged %q, read %q", p, off, gen, v, got)
				}
			}
		}
		if bad == 0 {
			r.say("topic-recreate: partition %d of incarnation %d holds its own %d records and nothing else", p, gen, len(read))
		}
	}
}

// readRange reads offsets [0, end) of a partition, by offset.
func readRange(ctx context.Context, cl *client.Client, topic string, p int32, end int64) (map[int64]string, error) {
	if err := cl.RefreshMetadata(ctx, topic); err != nil {
		return nil, err
	}
	c, err := client.NewConsumer(cl, topic, p, client.ConsumerConfig{MaxBytes: 1 << 20})
	if err != nil {
		return nil, err
	}
	c.SeekTo(0)
	out := map[int64]string{}
	for c.Position() < end {
		recs, err := c.Poll(ctx, 500*time.Millisecond)
		if err != nil {
			// A leader not ready yet, or moving: retried until ctx ends.
			if ctx.Err() != nil {
				return out, err
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for _, rec := range recs {
			out[rec.Offset] = string(rec.Value)
		}
	}
	return out, nil
}
