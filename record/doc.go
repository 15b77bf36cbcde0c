// Package record defines the batch format of gostream: the bytes a producer
// builds, the leader stamps, every replica stores, and every consumer
// decodes. The same bytes are used on disk and on the wire, so a follower
// verifies the checksum and stores the batch exactly as the leader sent it.
//
// A batch is laid out big-endian:
//
//	offset  size  field
//	0       8     BaseOffset   offset of the first record
//	8       4     Length       bytes after this field (whole batch = 12 + Length)
//	12      4     CRC          CRC32C (Castagnoli) of bytes [0,12) and [16,end)
//	16      4     LeaderEpoch  epoch of the leader that appended the batch
//	20      1     Magic        format version: 1, or 2 (below)
//	21      1     Attributes   reserved, 0
//	22      8     AppendTime   leader's clock at append, Unix milliseconds
//	30      4     RecordCount  number of records, at least 1
//	34      ...   records
//
// and each record, in order, with offset BaseOffset+i and the batch's
// AppendTime as its timestamp:
//
//	4   KeyLength   int32, -1 for a null key (distinct from an empty key)
//	... Key
//	4   ValueLength uint32
//	... Value
//	4   HeaderCount uint32
//	    per header: 4 KeyLength uint32, Key, 4 ValueLength uint32, Value
//
// The checksum covers every byte of the batch but its own four, so a batch
// that verifies has the base offset, epoch and time it was stamped with.
//
// A batch of magic 2 (MagicKafka) has the same header, and as its body one
// Kafka record batch (Kafka's magic 2: a 61-byte header, then its records,
// compressed with gzip, snappy, lz4 or zstd as the producer chose) byte for
// byte as the producer sent it (WrapKafka). Its base offset, leader epoch
// and record count equal the header's; Stamp patches the Kafka batch's
// base offset and leader epoch too (outside the Kafka batch's CRC-32C, so
// that stays as the producer computed it), and with LogAppendTime its max
// timestamp and CRC. Records gives each Kafka record its own timestamp,
// null keys and values as nil. Kafka returns the carried batch as a Kafka
// consumer is served it; AppendKafka builds an uncompressed Kafka batch of
// a batch of magic 1; AppendKafkaBatch builds one of records, as a
// producer does (the Go client's idempotent producer, with LogAppendTime:
// its records carry no timestamp of their own, and read as the leader's
// append time, as records of magic 1 do). docs/kafka.md says why the
// format is this.
//
// Invariants:
//
//   - Decoding never trusts a length: every length and count is checked
//     against the bytes that remain before anything is allocated.
//   - Frame and Validate accept a batch only if its checksum matches, its
//     magic is 1 or 2 and its attributes 0, its base offset and epoch are
//     not negative, it has at least one record and its offsets do not
//     overflow, and for magic 2 the Kafka batch it carries frames and
//     agrees with its header; Validate also needs exactly RecordCount
//     well-formed records to fill it (for magic 2, the Kafka batch's
//     CRC-32C too). Anything else is ErrInvalid (or ErrShort for bytes that
//     end inside the batch), never a panic.
//   - A Kafka batch is taken from a producer (CheckKafkaBatch, WrapKafka)
//     only with magic 2, its CRC-32C, base offset 0, no control or
//     transactional flag, a known codec, a last offset delta of its count
//     less one, and exactly that many records at contiguous offset deltas.
//   - Decompression never yields more than MaxUncompressed bytes: a
//     payload that would is ErrInvalid, found before or while it is read,
//     not after.
//   - Stamp rewrites the base offset, epoch and append time and the
//     checksum with them; no other function changes a batch's bytes.
//   - A valid batch of magic 1's records, encoded again by AppendBatch
//     and stamped with the batch's own base offset, epoch and time, are
//     the same bytes; a valid batch of magic 2 is served to Kafka as the
//     bytes it carries (FuzzBatchDecode, FuzzKafkaBatch).
//
// It imports the standard library and the compression libraries
// (klauspost/compress for gzip, snappy and zstd, pierrec/lz4); nothing of
// ours.
package record
