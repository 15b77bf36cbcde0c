package testcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// raceLog is a node's log with two reports of the race detector among its
// own lines, as a node built with -race prints them.
const raceLog = `{"@level":"info","@message":"node started","id":2}
==================
WARNING: DATA RACE
Write at 0x00c000123456 by goroutine 41:
  gostream/replication.(*Partition).Produce()
      /src/replication/partition.go:500 +0x1a4

Previous read at 0x00c000123456 by goroutine 39:
  gostream/replication.(*Partition).WaitAcked()
      /src/replication/partition.go:650 +0x88

Goroutine 41 (running) created at:
  gostream/broker.(*Broker).serve()
      /src/broker/broker.go:120 +0x2c
==================
{"@level":"info","@message":"leader","partition":0}
==================
WARNING: DATA RACE
Read at 0x00c0000abcde by goroutine 7:
  gostream/storage.(*Log).End()
==================
{"@level":"info","@message":"stopped"}
`

func TestDataRacesAreFoundInANodesLog(t *testing.T) {
	dir := t.TempDir()
	racy := &Node{ID: 2, logPath: filepath.Join(dir, "racy.log")}
	require.NoError(t, os.WriteFile(racy.logPath, []byte(raceLog), 0o644))
	races := racy.DataRaces()
	require.Len(t, races, 2)
	assert.True(t, strings.HasPrefix(races[0], "WARNING: DATA RACE\nWrite at"), races[0])
	assert.Contains(t, races[0], "(*Partition).WaitAcked()")
	assert.Contains(t, races[0], "broker.go:120")
	assert.NotContains(t, races[0], "leader", "a report ends at its closing line")
	assert.Equal(t, "WARNING: DATA RACE\nRead at 0x00c0000abcde by goroutine 7:\n  gostream/storage.(*Log).End()", races[1])

	clean := &Node{ID: 1, logPath: filepath.Join(dir, "clean.log")}
	require.NoError(t, os.WriteFile(clean.logPath, []byte("{\"@message\":\"node started\"}\n"), 0o644))
	assert.Empty(t, clean.DataRaces())
	missing := &Node{ID: 3, logPath: filepath.Join(dir, "none.log")}
	assert.Empty(t, missing.DataRaces(), "a node that never started has no log")

	c := &Cluster{Nodes: []*Node{clean, racy}}
	all := c.DataRaces()
	require.Len(t, all, 2)
	assert.True(t, strings.HasPrefix(all[0], "node 2: WARNING: DATA RACE"), all[0])

	// A report cut short (the node killed while printing it) is kept as
	// far as it goes; a long one is cut to raceReportLines lines.
	long := "WARNING: DATA RACE\n" + strings.Repeat("  frame\n", 3*raceReportLines)
	cut := &Node{ID: 4, logPath: filepath.Join(dir, "cut.log")}
	require.NoError(t, os.WriteFile(cut.logPath, []byte(long), 0o644))
	races = cut.DataRaces()
	require.Len(t, races, 1)
	assert.Len(t, strings.Split(races[0], "\n"), raceReportLines+1)
	assert.True(t, strings.HasSuffix(races[0], "\n..."), races[0])
}
