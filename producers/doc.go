// Package producers keeps, on each partition's leader, what idempotent
// producers have written to it, so that a retried batch is answered as
// the original and not appended twice (docs/kafka.md, "Idempotent
// producers").
//
// A batch of magic 2 whose producer id is not -1 is an idempotent
// producer's: it carries the producer id, its epoch and the sequence of
// its first record, and its records take the sequences after it. Per
// partition, the leader keeps for each producer id its epoch and its last
// five batches (first and last sequence, where they landed), and checks
// each new batch under one lock with its append (Host.Produce):
//
//   - a batch equal (first and last sequence, same epoch) to one of the
//     five is a duplicate: nothing is appended, and it is answered with
//     the original's offsets once the high watermark has passed them
//     (the original may still be waiting for its followers);
//   - an epoch older than the producer's is refused (InvalidProducerEpoch:
//     a newer producer with that id fenced it);
//   - a newer epoch must start at sequence 0, and resets the producer;
//   - otherwise the first sequence must follow the producer's last one
//     (wrapping past 2^31-1 to 0), or it is refused (OutOfOrderSequence);
//   - a producer id the leader has no state for starts its state with
//     whatever sequence it brings, as Kafka does since KIP-360: its state
//     may have expired.
//
// The state is a replication.LeaderStates state: built once per
// leadership by reading the replica's log (every batch of an idempotent
// producer, acknowledged or not: a new leader's log holds every
// acknowledged batch, and a batch it holds that is not yet acknowledged
// is answered only once it is), dropped when the leadership ends or an
// append's wait fails (and rebuilt from the log at the next batch). A
// producer's retry after a failover or a restart of its leader thus finds
// its batch in the new leader's log and is answered as a duplicate.
//
// A producer idle for Config.Expiry (a day by default, as Kafka's
// producer.id.expiration.ms) is forgotten, so the state stays bounded by
// the producers active in a day.
//
// Invariants:
//
//   - Per partition and producer id, the leader appends a batch only
//     when its first sequence follows the last appended one at the same
//     epoch, or it starts a new epoch at 0, or the id is unknown: no
//     batch of a producer is in the log twice, as long as its state was
//     not forgotten.
//   - A duplicate is answered only once the original is acknowledged
//     (the high watermark passed it).
//   - The check and the append are one step under the state's lock:
//     batches of one producer are checked in the order they are appended.
package producers
