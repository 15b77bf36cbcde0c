package bufpool

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBufClasses(t *testing.T) {
	for c := 0; c < bufClasses; c++ {
		size := classSize(c)
		assert.Equal(t, c, bufClass(size), "class of %d", size)
		if c > 0 {
			assert.Greater(t, size, classSize(c-1))
			assert.Equal(t, c, bufClass(classSize(c-1)+1), "class of %d", classSize(c-1)+1)
		}
	}
	assert.Equal(t, MaxSize, classSize(bufClasses-1))
	for _, n := range []int{MinSize, MinSize + 1, 5000, 6144, 6145, 100 << 10, 256 << 10, 1<<20 + 12, MaxSize} {
		b := Get(n)
		require.Len(t, b, n)
		assert.Less(t, cap(b), n+n/2+1, "a buffer of %d bytes wastes less than half of it", n)
		Put(b)
	}
	// Buffers outside the classes are allocated as asked and not kept.
	assert.Equal(t, 100, cap(Get(100)))
	assert.Equal(t, MaxSize+1, cap(Get(MaxSize+1)))
	Put(make([]byte, 5000)) // not a class's capacity: left to the collector
}

// TestRefGivesBackOnceEveryHolderLetsGo: the buffer is reused only once
// its maker and every Hold have let go, and a release counts once.
func TestRefGivesBackOnceEveryHolderLetsGo(t *testing.T) {
	r := NewRef(Get(8 << 10))
	release := r.Hold()
	r.Drop()
	assert.Equal(t, int32(1), r.refs.Load(), "held")
	release()
	release()
	assert.Equal(t, int32(0), r.refs.Load(), "released once, then given back")
}
