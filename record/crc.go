package record

// A batch's CRC-32C covers its header (but the CRC field) and everything
// after it. Stamping changes only header fields, and the records after
// the header, which are most of the bytes, keep their checksum: so the
// batch's CRC is computed from the header's checksum and the records'
// (crcCombine), and the records are read once per replica, to check them,
// not once more each time the header changes. For a Kafka batch the
// records' part is exactly what the Kafka batch's own CRC covers (from its
// attributes on), so once that CRC is checked the batch's comes for free.
// Combining costs about as much as the CRC-32C of a few KiB, so batches
// under combineMin are simply read again.
//
// crcCombine multiplies the first checksum by x^(8n) modulo the
// polynomial, then adds the second: CRC is linear over GF(2), and a
// message a followed by n bytes b has the checksum of a shifted past n
// bytes plus that of b. Shifting by x^(8n) is done with the table of
// x^(2^k), one multiplication a set bit of 8n: about forty 32-bit
// multiplications of 32 steps for a megabyte, against reading the
// megabyte.

// castagnoliReversed is the Castagnoli polynomial, bits reversed, as
// hash/crc32 uses it.
const castagnoliReversed = 0x82f63b78

// mulModP returns a*b modulo the polynomial, both in the reversed
// representation (the bit for x^0 is the top one).
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return p
}

// x2k[k] is x^(2^k) modulo the polynomial.
var x2k = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulModP(p, p)
	}
	return t
}()

// xPow8n returns x^(8n) modulo the polynomial.
func xPow8n(n int) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulModP(x2k[k], p)
		}
	}
	return p
}

// crcCombine returns the CRC-32C of a followed by b, from crcA, the CRC-32C
// of a, crcB, that of b, and n, the length of b.
func crcCombine(crcA, crcB uint32, n int) uint32 {
	return mulModP(xPow8n(n), crcA) ^ crcB
}
