package groups

import (
	"testing"
)

// FuzzDecode: any bytes either decode to a record that encodes back to the
// same bytes, or are refused; nothing panics.
func FuzzDecode(f *testing.F) {
	for _, r := range sampleRecords() {
		k, v, err := r.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(k, v)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := Decode(key, value)
		if err != nil {
			return
		}
		k, v, err := r.Encode()
		if err != nil {
			t.Fatalf("decoded %+v, which does not encode: %v", r, err)
		}
		if string(k) != string(key) || string(v) != string(value) {
			t.Fatalf("decoded %+v, which encodes to other bytes", r)
		}
	})
}
