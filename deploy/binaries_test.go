package deploy_test

import (
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// moduleRoot is the directory of go.mod: the deploy package sits one below.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	return root
}

// envTwin matches the environment twins urfave/cli lists in --help: [$GOSTREAM_ID].
var envTwin = regexp.MustCompile(`\$(GOSTREAM_[A-Z0-9_]+)`)

// envVarsOf builds the command in cmd/<name> into t.TempDir(), runs it with
// --help and returns the GOSTREAM_* variables the help lists, the
// environment twins of its flags.
func envVarsOf(t *testing.T, name string) map[string]bool {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
	build.Dir = moduleRoot(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/%s:\n%s", name, out)

	help, err := exec.Command(bin, "--help").Output()
	require.NoError(t, err, "%s --help", name)
	vars := map[string]bool{}
	for _, m := range envTwin.FindAllStringSubmatch(string(help), -1) {
		vars[m[1]] = true
	}
	require.NotEmpty(t, vars, "%s --help lists no $GOSTREAM_* variable:\n%s", name, help)
	return vars
}

// requireFlagVars fails unless every GOSTREAM_* name in names is one of the
// binary's flag variables.
func requireFlagVars(t *testing.T, binary string, flagVars map[string]bool, where string, names []string) {
	t.Helper()
	for _, name := range names {
		if strings.HasPrefix(name, "GOSTREAM_") {
			require.True(t, flagVars[name], "%s sets %s, which is no flag of %s (it has %v)",
				where, name, binary, sortedKeys(flagVars))
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}
