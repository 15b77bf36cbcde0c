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
//	20      1     Magic        format version, 1
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
// Invariants:
//
//   - Decoding never trusts a length: every length and count is checked
//     against the bytes that remain before anything is allocated.
//   - Frame and Validate accept a batch only if its checksum matches, its
//     magic is 1 and its attributes 0, its base offset and epoch are not
//     negative, it has at least one record and its offsets do not
//     overflow; Validate also needs exactly RecordCount well-formed
//     records to fill it. Anything else is ErrInvalid (or ErrShort for
//     bytes that end inside the batch), never a panic.
//   - Stamp rewrites the base offset, epoch and append time and the
//     checksum with them; no other function changes a batch's bytes.
//   - A valid batch's records, encoded again by AppendBatch and stamped
//     with the batch's own base offset, epoch and time, are the same
//     bytes (FuzzBatchDecode).
//
// It imports only the standard library.
package record
