package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHoistFlags(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  string
	}{
		// Already in urfave's order: unchanged.
		{in: "-o json topic describe orders", want: "-o json topic describe orders"},
		{in: "topic list", want: "topic list"},
		{in: "", want: ""},
		// Global flags after the command, or between its arguments.
		{in: "topic describe orders -o json", want: "-o json topic describe orders"},
		{in: "topic describe -o json orders", want: "-o json topic describe orders"},
		{in: "topic -o json describe orders", want: "-o json topic describe orders"},
		{in: "topic describe orders --output=json --timeout 3s", want: "--output=json --timeout 3s topic describe orders"},
		{in: "cluster status --bootstrap a:1,b:2", want: "--bootstrap a:1,b:2 cluster status"},
		// Command flags after positional arguments.
		{in: "topic create orders --partitions 3 --replication-factor 2",
			want: "topic create --partitions 3 --replication-factor 2 orders"},
		{in: "produce orders v1 --key k v2 -o json", want: "-o json produce --key k orders v1 v2"},
		// Bool flags take no value.
		{in: "consume orders --follow --max 5", want: "consume --follow --max 5 orders"},
		{in: "failover --dry-run --broker 2", want: "failover --dry-run --broker 2"},
		// A repeated flag keeps its order, so the last one still wins.
		{in: "-o table topic list -o json", want: "-o table -o json topic list"},
		// After "--" nothing is a flag or a command.
		{in: "produce orders -- -o json", want: "produce -- orders -o json"},
		{in: "produce orders --key k -- --partition", want: "produce --key k -- orders --partition"},
		// A value that looks like a command name is still the flag's value.
		{in: "-o topic list", want: "-o topic list"},
		// Unknown flags stay at the level they were typed, for urfave to report.
		{in: "topic list --bogus", want: "topic list --bogus"},
		{in: "--bogus topic list", want: "--bogus topic list"},
		{in: "topic describe x --help", want: "topic describe --help x"},
		// An unknown command is a positional argument.
		{in: "frob -o json", want: "-o json frob"},
		// Missing value at the end of the line.
		{in: "topic list -o", wantErr: "InvalidFlag: flag needs an argument: -o"},
		{in: "topic create x --partitions", wantErr: "InvalidFlag: flag needs an argument: --partitions"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			app := newApp(strings.NewReader(""), io.Discard, io.Discard)
			args := append([]string{"gostream-ctl"}, strings.Fields(tt.in)...)
			got, err := hoistFlags(app, args)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, append([]string{"gostream-ctl"}, strings.Fields(tt.want)...), got)
		})
	}
}
