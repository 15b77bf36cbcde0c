package transport

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocCodeTable keeps the table of error codes in the package
// documentation (doc.go) true to errors.go: every code, with its number,
// name and retriable flag, and no other.
func TestDocCodeTable(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	row := regexp.MustCompile(`^//\t(\d+)\s+(\S+)\s+(yes|no)\b`)
	documented := map[Code]codeInfo{}
	for _, line := range strings.Split(string(src), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		documented[Code(n)] = codeInfo{name: m[2], retriable: m[3] == "yes"}
	}
	assert.Equal(t, codes, documented, "doc.go's table of error codes must match errors.go's")
}
