package metadata

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// KeyPartition returns the partition, in [0, n), of key in a topic of n
// partitions: the SHA-256 digest of key read as a big-endian unsigned
// 256-bit integer, modulo n. Clients route records by it, and brokers
// route a group to its partition of the offsets topic by it. It panics if
// n is not positive.
func KeyPartition(key []byte, n int) int {
	if n <= 0 {
		panic(fmt.Sprintf("metadata: KeyPartition of %d partitions", n))
	}
	sum := sha256.Sum256(key)
	// Horner's rule in base 2^64: r stays below n, and Rem64 computes
	// (r·2^64 + word) mod n exactly.
	var r uint64
	for i := 0; i < len(sum); i += 8 {
		r = bits.Rem64(r, binary.BigEndian.Uint64(sum[i:]), uint64(n))
	}
	return int(r)
}
