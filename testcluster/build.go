package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Binaries are the paths of the built gostream binaries.
type Binaries struct {
	Node string
	Ctl  string
	// CrashNode is gostream-node built with the crashfs tag: its storage
	// keeps what it writes in memory until it is fsync'd (storage.CrashFS),
	// so kill -9 loses exactly the bytes not yet fsync'd, and a file named
	// by GOSTREAM_TEST_DISK_FULL makes its disk full.
	CrashNode string
}

var (
	buildOnce sync.Once
	built     Binaries
	buildErr  error

	memberOnce     sync.Once
	memberBin      string
	memberBuildErr error
)

// moduleRoot finds the directory holding go.mod, from this source file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("testcluster: cannot locate source")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testcluster: go.mod not found above %s", file)
		}
		dir = parent
	}
}

// Build builds gostream-node and gostream-ctl once per process into a
// temporary directory, with the race detector when race is true, and returns
// their paths. Later calls return the same binaries.
func Build(race bool) (Binaries, error) {
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "gostream-bin-")
		if err != nil {
			buildErr = err
			return
		}
		b := Binaries{Node: filepath.Join(dir, "gostream-node"), Ctl: filepath.Join(dir, "gostream-ctl"),
			CrashNode: filepath.Join(dir, "gostream-node-crashfs")}
		for _, t := range []struct{ out, pkg, tags string }{{b.Node, "./cmd/node", ""}, {b.Ctl, "./cmd/ctl", ""}, {b.CrashNode, "./cmd/node", "crashfs"}} {
			args := []string{"build", "-o", t.out, "-ldflags", "-X main.version=testcluster"}
			if race {
				args = append(args, "-race")
			}
			if t.tags != "" {
				args = append(args, "-tags", t.tags)
			}
			cmd := exec.Command("go", append(args, t.pkg)...)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", t.pkg, err, strings.TrimSpace(string(out)))
				return
			}
		}
		built = b
	})
	return built, buildErr
}

// BuildKafkaMember builds testcluster/cmd/kafkamember, the chaos
// harness's Kafka group member, once per process into a temporary
// directory, and returns its path. It is built apart from Build, only by
// the runs that start Kafka group members: it is a tool of the harness,
// not the system under test, so never with the race detector.
func BuildKafkaMember() (string, error) {
	memberOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			memberBuildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "gostream-kafkamember-")
		if err != nil {
			memberBuildErr = err
			return
		}
		out := filepath.Join(dir, "kafkamember")
		cmd := exec.Command("go", "build", "-o", out, "./testcluster/cmd/kafkamember")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			memberBuildErr = fmt.Errorf("go build ./testcluster/cmd/kafkamember: %v\n%s", err, strings.TrimSpace(string(b)))
			return
		}
		memberBin = out
	})
	return memberBin, memberBuildErr
}
