package console

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBytesOf(t *testing.T) {
	assert.Nil(t, bytesOf(nil), "no bytes (a null key) is null")

	b := bytesOf([]byte{})
	require.NotNil(t, b.Text)
	assert.Equal(t, "", *b.Text)
	assert.Equal(t, "", b.B64)

	b = bytesOf([]byte("<script>"))
	assert.Equal(t, "<script>", *b.Text)
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte("<script>")), b.B64)
	assert.False(t, b.Cut)

	b = bytesOf([]byte{0xff, 'a'})
	assert.Nil(t, b.Text, "not UTF-8: base64 alone")
	assert.Equal(t, "/2E=", b.B64)

	// Cut at 64 KiB, between two characters when the whole is text.
	long := "a" + strings.Repeat("é", maxShown) // the 64 KiB mark falls inside an é
	b = bytesOf([]byte(long))
	assert.True(t, b.Cut)
	assert.Equal(t, len(long), b.Size)
	assert.Equal(t, long[:maxShown-1], *b.Text)
	raw, err := base64.StdEncoding.DecodeString(b.B64)
	require.NoError(t, err)
	assert.Equal(t, long[:maxShown-1], string(raw))

	bin := append([]byte{0xff}, make([]byte, maxShown)...)
	b = bytesOf(bin)
	assert.True(t, b.Cut)
	assert.Nil(t, b.Text)
	raw, err = base64.StdEncoding.DecodeString(b.B64)
	require.NoError(t, err)
	assert.Equal(t, bin[:maxShown], raw)
}
