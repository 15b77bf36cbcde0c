package testcluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// KafkaMemberEvent is one line a Kafka group member (testcluster/cmd/
// kafkamember) printed: an assignment ("assigned": Added, and Owned, all
// it owns in Generation), a revocation or a loss ("revoked", "lost":
// Partitions, and what it still owns), a record it read ("record":
// Partition, Offset, Value) or a commit the coordinator acknowledged
// ("committed": Offsets by partition, in Generation).
type KafkaMemberEvent struct {
	Event      string          `json:"event"`
	T          int64           `json:"t"` // the member's clock, Unix nanoseconds
	Member     string          `json:"member,omitempty"`
	Generation int32           `json:"generation,omitempty"`
	Added      []int32         `json:"added,omitempty"`
	Partitions []int32         `json:"partitions,omitempty"`
	Owned      []int32         `json:"owned,omitempty"`
	Partition  int32           `json:"partition"`
	Offset     int64           `json:"offset"`
	Value      string          `json:"value,omitempty"`
	Offsets    map[int32]int64 `json:"offsets,omitempty"`
}

// KafkaMemberLog is what one process of a Kafka group member printed, in
// order. Started and Ended are the harness's clock: before the process
// started, and after its last line was read and it exited (zero while it
// runs).
type KafkaMemberLog struct {
	Slot, Incarnation int
	// Instance is the static member's instance id: its processes are one
	// member, whose id changes at each restart.
	Instance       string
	Started, Ended time.Time
	Events         []KafkaMemberEvent
}

// who names the log's process in a violation.
func (l *KafkaMemberLog) who() string {
	return fmt.Sprintf("Kafka member %d (incarnation %d)", l.Slot, l.Incarnation)
}

// KafkaGroupStats sums up the logs CheckKafkaMemberLogs checked.
type KafkaGroupStats struct {
	Processes, Generations, Assignments, Records, Commits int
	// Redelivered counts the records printed again (each after a
	// rebalance, at or above the last commit before it, or it is a
	// violation); Spans, the stretches of one process owning one partition.
	Redelivered, Spans int
}

func (s KafkaGroupStats) String() string {
	return fmt.Sprintf("%d member processes, %d generations, %d assignments, %d partition ownerships, %d records printed (%d of them again), %d commits acknowledged",
		s.Processes, s.Generations, s.Assignments, s.Spans, s.Records, s.Redelivered, s.Commits)
}

// CheckKafkaMemberLogs checks what the Kafka group's members printed:
//
//   - no partition owned by two members in one generation (each member
//     prints everything it owns at every generation's assignment; the
//     processes of the static member are one member);
//   - a member reads each offset of a partition once for as long as it
//     owns it: a record is printed again only after a rebalance took the
//     partition away, or from another member, after a rebalance or a
//     member's death;
//   - and then only what was not committed: the first record a member
//     reads of a partition it was given is at or above every commit of
//     it acknowledged before, that is every commit of an earlier
//     generation (the coordinator refuses a commit of a generation that
//     is not the group's, so those all came before this one began), and
//     every commit of a process that had exited before this one started;
//   - a member prints records only of partitions it owns.
func CheckKafkaMemberLogs(logs []KafkaMemberLog) ([]string, KafkaGroupStats) {
	var v []string
	var st KafkaGroupStats
	n := 0
	add := func(format string, args ...any) {
		if n++; n <= maxReported {
			v = append(v, "kafka-group: "+fmt.Sprintf(format, args...))
		}
	}
	type owner struct{ key, who string }
	type genPart struct {
		gen int32
		p   int32
	}
	type commit struct {
		gen    int32
		offset int64
		log    int
	}
	owners := map[genPart]owner{}
	commits := map[int32][]commit{}
	gens := map[int32]bool{}
	st.Processes = len(logs)
	for i, l := range logs {
		for _, e := range l.Events {
			switch e.Event {
			case "assigned":
				st.Assignments++
				gens[e.Generation] = true
				o := owner{key: "member " + e.Member, who: fmt.Sprintf("%s (member id %s)", l.who(), e.Member)}
				if l.Instance != "" {
					o.key = "instance " + l.Instance
				}
				for _, p := range e.Owned {
					k := genPart{e.Generation, p}
					if prev, ok := owners[k]; ok && prev.key != o.key {
						add("partition %d owned by %s and by %s in generation %d", p, prev.who, o.who, e.Generation)
					}
					owners[k] = o
				}
			case "committed":
				st.Commits++
				for p, off := range e.Offsets {
					commits[p] = append(commits[p], commit{e.Generation, off, i})
				}
			}
		}
	}
	st.Generations = len(gens)

	// committedBefore is the highest commit of p that was acknowledged
	// before log i's span of p that began in generation gen.
	committedBefore := func(i int, p, gen int32) (commit, bool) {
		var best commit
		found := false
		for _, c := range commits[p] {
			earlier := c.gen < gen
			if e := logs[c.log].Ended; !e.IsZero() && e.Before(logs[i].Started) {
				earlier = true
			}
			if earlier && (!found || c.offset > best.offset) {
				best, found = c, true
			}
		}
		return best, found
	}
	type span struct {
		gen         int32
		first, last int64
	}
	delivered := map[pOff]bool{}
	for i, l := range logs {
		owned := map[int32]*span{}
		for _, e := range l.Events {
			switch e.Event {
			case "assigned":
				now := map[int32]bool{}
				for _, p := range e.Owned {
					now[p] = true
					if owned[p] == nil {
						owned[p] = &span{gen: e.Generation, first: -1, last: -1}
						st.Spans++
					}
				}
				for p := range owned {
					if !now[p] {
						delete(owned, p)
					}
				}
			case "revoked", "lost":
				for _, p := range e.Partitions {
					delete(owned, p)
				}
			case "record":
				st.Records++
				k := pOff{e.Partition, e.Offset}
				if delivered[k] {
					st.Redelivered++
				}
				delivered[k] = true
				sp := owned[e.Partition]
				switch {
				case sp == nil:
					add("%s printed partition %d offset %d (%q), a partition it did not own", l.who(), e.Partition, e.Offset, e.Value)
				case sp.last >= 0 && e.Offset <= sp.last:
					add("%s printed partition %d offset %d again, after offset %d, with no rebalance between (it has owned it since generation %d)",
						l.who(), e.Partition, e.Offset, sp.last, sp.gen)
				case sp.first < 0:
					sp.first = e.Offset
					if c, ok := committedBefore(i, e.Partition, sp.gen); ok && e.Offset < c.offset {
						add("%s, given partition %d in generation %d, read from offset %d: below offset %d, committed and acknowledged before (generation %d, by %s)",
							l.who(), e.Partition, sp.gen, e.Offset, c.offset, c.gen, logs[c.log].who())
					}
				}
				if sp != nil {
					sp.last = max(sp.last, e.Offset)
				}
			}
		}
	}
	if n > maxReported {
		v = append(v, fmt.Sprintf("kafka-group: %d more not listed", n-maxReported))
	}
	return v, st
}

// SaveKafkaLogs writes the Kafka members' lines to path, one a line,
// each with the slot and incarnation of the process that printed it.
func (g *GroupWorkload) SaveKafkaLogs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	g.mu.Lock()
	for _, l := range g.logs {
		for _, e := range l.Events {
			if err := enc.Encode(struct {
				Slot        int              `json:"slot"`
				Incarnation int              `json:"incarnation"`
				Event       KafkaMemberEvent `json:"line"`
			}{l.Slot, l.Incarnation, e}); err != nil {
				break
			}
		}
	}
	g.mu.Unlock()
	return errors.Join(w.Flush(), f.Close())
}
