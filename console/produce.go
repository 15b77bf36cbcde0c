package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"gostream/client"
	"gostream/metadata"
	"gostream/record"
)

// ProduceRequest is the body of POST /ui/api/topics/{topic}/produce: one
// record, as text.
type ProduceRequest struct {
	// Partition is the partition to write to; absent, the key chooses it
	// (as every producer's records), and without a key they go round
	// robin.
	Partition *int32 `json:"partition,omitempty"`
	// Key is the record's key; absent, it has none (null).
	Key *string `json:"key,omitempty"`
	// Value is the record's value; it must be given ("" is an empty
	// value).
	Value   *string         `json:"value"`
	Headers []ProduceHeader `json:"headers,omitempty"`
}

// ProduceHeader is a header of a record to produce.
type ProduceHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Produced is the answer of POST /ui/api/topics/{topic}/produce: where
// the record is, durable on every active replica of its partition.
type Produced struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Timestamp is the leader's append time, Unix milliseconds.
	Timestamp int64 `json:"timestamp"`
}

// producerRecord is the record req asks for, for topic; an error saying what is
// wrong with req otherwise.
func (req *ProduceRequest) producerRecord(topic string) (client.ProducerRecord, error) {
	if req.Value == nil {
		return client.ProducerRecord{}, errors.New(`the record needs a value ("" for an empty one)`)
	}
	rec := client.ProducerRecord{Topic: topic, Value: []byte(*req.Value)}
	if req.Partition != nil {
		if *req.Partition < 0 {
			return client.ProducerRecord{}, fmt.Errorf("partition %d: partitions count from 0", *req.Partition)
		}
		rec.Partition, rec.ManualPartition = *req.Partition, true
	}
	if req.Key != nil {
		rec.Key = []byte(*req.Key)
	}
	for _, h := range req.Headers {
		rec.Headers = append(rec.Headers, record.Header{Key: h.Key, Value: []byte(h.Value)})
	}
	return rec, nil
}

func (s *Server) produce(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if err := s.allowed(r, metadata.OpWrite, metadata.ResourceTopic, topic); err != nil {
		writeErr(w, err)
		return
	}
	var req ProduceRequest
	if !readJSON(w, r, &req) {
		return
	}
	rec, err := req.producerRecord(topic)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	c := s.client(w, r)
	if c == nil {
		return
	}
	p, err := s.producer(c)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "Unavailable", "the node cannot produce yet: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	ack, err := p.Send(ctx, rec)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Produced{Partition: ack.Partition, Offset: ack.Offset, Timestamp: ack.Timestamp})
}

// consoleProducer is the console's one producer, made on the first
// produce and closed with the console.
type consoleProducer struct {
	mu     sync.Mutex
	p      *client.Producer
	closed bool
}

// producer returns the console's producer of c, making it on first use:
// an idempotent one, so that a record sent again after a lost answer is
// written once, sending each record at once (no linger).
func (s *Server) producer(c *client.Client) (*client.Producer, error) {
	s.prod.mu.Lock()
	defer s.prod.mu.Unlock()
	switch {
	case s.prod.closed:
		return nil, client.ErrClosed
	case s.prod.p != nil:
		return s.prod.p, nil
	}
	p, err := client.NewProducer(c, client.ProducerConfig{Linger: -1, Idempotent: true})
	if err != nil {
		return nil, err
	}
	s.prod.p = p
	return p, nil
}

// closeProducer closes the console's producer, once the records given to
// it have their outcome; it makes no other.
func (s *Server) closeProducer() {
	s.prod.mu.Lock()
	p := s.prod.p
	s.prod.p, s.prod.closed = nil, true
	s.prod.mu.Unlock()
	if p != nil {
		p.Close()
	}
}
