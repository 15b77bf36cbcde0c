package exitcode_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"gostream/cmd/internal/exitcode"
)

func TestReport(t *testing.T) {
	base := errors.New("disk on fire")
	tests := []struct {
		name     string
		err      error
		wantLine string
		wantCode int
	}{
		{"nil", nil, "", exitcode.OK},
		{"usage", exitcode.Usagef("InvalidFlag", "--id %q: want a positive integer", "x"),
			`InvalidFlag: --id "x": want a positive integer` + "\n", exitcode.Usage},
		{"failure", exitcode.Fail("StampMismatch", base), "StampMismatch: disk on fire\n", exitcode.Failed},
		{"wrapped", fmt.Errorf("start: %w", exitcode.Fail("CannotListen", base)),
			"CannotListen: start: disk on fire\n", exitcode.Failed},
		{"unnamed", base, "Error: disk on fire\n", exitcode.Failed},
		{"multi-line", exitcode.Fail("Corrupt", errors.New("a\nb\n")), "Corrupt: a b\n", exitcode.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			assert.Equal(t, tt.wantCode, exitcode.Report(&buf, tt.err))
			assert.Equal(t, tt.wantLine, buf.String())
		})
	}
}

func TestErrorUnwraps(t *testing.T) {
	base := errors.New("x")
	err := exitcode.Fail("Name", base)
	assert.ErrorIs(t, err, base)
	assert.Equal(t, "Name: x", err.Error())
}
