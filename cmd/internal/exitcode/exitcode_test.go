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

func TestFlagErrorNamesTheFlagAsTyped(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"flag provided but not defined: -bogus", "UnknownFlag: unknown flag --bogus (see gostream-ctl topic create --help)"},
		{"flag provided but not defined: -x", "UnknownFlag: unknown flag -x (see gostream-ctl topic create --help)"},
		{`invalid value "abc" for flag -partitions: parse error`, `InvalidFlag: invalid value "abc" for --partitions: not a number`},
		{`invalid value "1y" for flag -timeout: time: unknown unit "y" in duration "1y"`, `InvalidFlag: invalid value "1y" for --timeout: time: unknown unit "y" in duration "1y"`},
		{"flag needs an argument: -partitions", "InvalidFlag: --partitions needs a value (see gostream-ctl topic create --help)"},
		{"something else", "InvalidFlag: something else"},
	} {
		got := exitcode.FlagError(errors.New(tc.in), "gostream-ctl topic create")
		if got.Error() != tc.want {
			t.Errorf("FlagError(%q) = %q, want %q", tc.in, got.Error(), tc.want)
		}
		if got.Code != exitcode.Usage {
			t.Errorf("FlagError(%q) exits %d, want the usage status", tc.in, got.Code)
		}
	}
}
