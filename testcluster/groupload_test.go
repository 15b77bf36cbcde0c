package testcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

// A group that falls behind is told in the violation itself (a failure in
// CI is seen only in the test's output): the coordinator's last
// description and each member's last stderr lines; each member's whole
// stderr, a goroutine dump from a Go member included, is saved with the
// run.
func TestGroupBehindSaysWhy(t *testing.T) {
	dir := t.TempDir()
	g := NewGroupWorkload(&Cluster{cfg: Config{Dir: dir}}, "chaos", &History{}, t.Logf)
	g.group = "chaos-group-0"
	cmd := exec.Command("sh", "-c", "echo 'warning: first' >&2; echo 'warning: fetch of chaos/1 failed: NotLeader' >&2; exec sleep 30")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	for _, slot := range g.slots() {
		g.members[slot] = &groupMember{slot: slot, cmd: cmd, done: done, started: 1, stderr: stderr}
	}
	g.check(client.GroupDescription{State: "stable", GroupEpoch: 7, Coordinator: 2,
		Members:    []client.GroupMember{{MemberID: "m-1", Owned: []client.TopicPartition{{Topic: "chaos", Partition: 1}}}},
		Partitions: []client.GroupPartition{{Topic: "chaos", Partition: 1, Committed: 299}}})
	require.Eventually(t, func() bool { return len(stderr.String()) > 0 && len(lastLines(stderr.String(), 4)) == 2 }, 5*time.Second, 10*time.Millisecond)

	why := g.whyBehind()
	assert.Contains(t, why, "state stable, generation 7, coordinator 2, members m-1[chaos/1], committed chaos/1@299")
	assert.Contains(t, why, `member 1 (incarnation 1, running), last stderr: ["warning: first" "warning: fetch of chaos/1 failed: NotLeader"]`)

	g.dumpMembers()
	<-done // SIGQUIT ended it
	b, err := os.ReadFile(filepath.Join(dir, "group-member-1-1.stderr"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "NotLeader")
}
