package client

import (
	"crypto/sha256"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPartitionKnownVectors(t *testing.T) {
	// Computed independently with
	// python3 -c 'import hashlib; print(int.from_bytes(hashlib.sha256(KEY).digest(), "big") % N)'
	tests := []struct {
		key  string
		n    int
		want int
	}{
		{"user-1", 4, 3},
		{"user-1", 7, 1},
		{"user-2", 4, 3},
		{"", 4, 1},
		{"", 3, 1},
		{"orders-42", 12, 10},
		{"\x00\xff", 1000003, 853495},
		{"user-1", 1<<61 - 1, 135561320180761448},
		{"k", math.MaxInt64, 5405854847799605147},
		{"anything", 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			assert.Equal(t, tc.want, Partition([]byte(tc.key), tc.n))
		})
	}
}

func TestPartitionMatchesBigIntegerArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ns := []int{1, 2, 3, 4, 10, 255, 256, 1000, 1 << 31, 1<<32 + 15, 1<<62 + 1, math.MaxInt64}
	for i := 0; i < 2000; i++ {
		key := make([]byte, rng.IntN(40))
		for j := range key {
			key[j] = byte(rng.UintN(256))
		}
		n := ns[i%len(ns)]
		if i%3 == 0 {
			n = 1 + rng.IntN(math.MaxInt64)
		}
		sum := sha256.Sum256(key)
		want := new(big.Int).Mod(new(big.Int).SetBytes(sum[:]), big.NewInt(int64(n))).Int64()
		if !assert.Equal(t, int(want), Partition(key, n), "key %x, n %d", key, n) {
			return
		}
	}
}

func TestPartitionPanicsWithoutPartitions(t *testing.T) {
	assert.Panics(t, func() { Partition([]byte("k"), 0) })
}
