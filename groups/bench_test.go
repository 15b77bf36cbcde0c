package groups

import (
	"fmt"
	"testing"
)

// BenchmarkRebuild decodes and applies a log of commits, as a new
// coordinator does when it becomes leader of its partition: 100 groups,
// 100 partitions each, 1,000,000 commits per op. It measures the
// decoding and applying only, not the reading from disk.
func BenchmarkRebuild(b *testing.B) {
	const commits = 1_000_000
	type kv struct{ k, v []byte }
	log := make([]kv, 0, commits)
	for i := 0; i < commits; i++ {
		r := Record{Group: fmt.Sprintf("group-%d", i%100), Kind: KindCommit, Commit: &Commit{
			Topic: "orders", TopicID: "0123456789abcdef0123456789abcdef", Partition: int32(i / 100 % 100),
			Offset: int64(i), MemberID: "member-1", MemberEpoch: 7, TimeMs: 1764000000000 + int64(i)}}
		k, v, err := r.Encode()
		if err != nil {
			b.Fatal(err)
		}
		log = append(log, kv{k, v})
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		s := NewState()
		for _, e := range log {
			r, err := Decode(e.k, e.v)
			if err != nil {
				b.Fatal(err)
			}
			s.Apply(r)
		}
		if len(s.Groups()) != 100 {
			b.Fatalf("%d groups", len(s.Groups()))
		}
	}
	b.ReportMetric(float64(commits), "commits/op")
}
