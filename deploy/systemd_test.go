package deploy_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readEnvFile reads KEY=VALUE lines as systemd's EnvironmentFile= does,
// skipping blank lines and comments.
func readEnvFile(t *testing.T, file string) (map[string]string, []string) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	env := map[string]string{}
	var keys []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q is not KEY=VALUE", file, line)
		require.NotContains(t, env, k, "%s: %s set twice", file, k)
		env[k] = v
		keys = append(keys, k)
	}
	require.NoError(t, s.Err())
	return env, keys
}

// readCommentedSettings reads the settings an env file shows commented
// out, lines "#GOSTREAM_NAME=VALUE" with no space after the #, as
// systemd's EnvironmentFile= would read them once uncommented. Comments
// that explain begin with "# " and are not settings.
func readCommentedSettings(t *testing.T, file string) (map[string]string, []string) {
	t.Helper()
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	env := map[string]string{}
	var keys []string
	for _, line := range strings.Split(string(text), "\n") {
		setting, ok := strings.CutPrefix(strings.TrimSpace(line), "#GOSTREAM_")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut("GOSTREAM_"+setting, "=")
		require.True(t, ok, "%s: %q is not #KEY=VALUE", file, line)
		require.NotContains(t, env, k, "%s: %s shown twice", file, k)
		env[k] = v
		keys = append(keys, k)
	}
	return env, keys
}

// readUnit reads a systemd unit file into section -> key -> values (a key
// may repeat).
func readUnit(t *testing.T, file string) map[string]map[string][]string {
	t.Helper()
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	unit := map[string]map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			unit[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s: %q is not KEY=VALUE", file, line)
			require.NotEmpty(t, section, "%s: %q before any [section]", file, line)
			unit[section][k] = append(unit[section][k], v)
		}
	}
	return unit
}

func TestSystemdUnitAndEnvFile(t *testing.T) {
	nodeVars := envVarsOf(t, "node")
	env, keys := readEnvFile(t, "node.env.example")
	commented, commentedKeys := readCommentedSettings(t, "node.env.example")
	unit := readUnit(t, "gostream-node.service")
	service := unit["Service"]
	require.NotNil(t, service, "gostream-node.service has no [Service] section")
	one := func(t *testing.T, key string) string {
		t.Helper()
		require.Len(t, service[key], 1, "[Service] %s", key)
		return service[key][0]
	}

	t.Run("the env file sets every flag of gostream-node and nothing else", func(t *testing.T) {
		requireFlagVars(t, "gostream-node", nodeVars, "node.env.example", keys)
		for _, k := range keys {
			assert.True(t, strings.HasPrefix(k, "GOSTREAM_"), "node.env.example sets %s, which gostream-node does not read", k)
			v := env[k]
			assert.NotEmpty(t, v, "node.env.example: %s is empty", k)
			assert.False(t, strings.ContainsAny(v, `"'`), "node.env.example: %s=%s: no quotes, systemd keeps them", k, v)
		}
		for _, v := range sortedKeys(nodeVars) {
			_, set := env[v]
			_, shown := commented[v]
			assert.True(t, set || shown, "node.env.example does not show %s, set or commented out (#%s=...): document every variable", v, v)
		}
	})

	t.Run("the settings shown commented out are flags of gostream-node too", func(t *testing.T) {
		requireFlagVars(t, "gostream-node", nodeVars, "node.env.example (commented out)", commentedKeys)
		for _, k := range commentedKeys {
			assert.NotContains(t, env, k, "node.env.example sets %s and shows it commented out too", k)
			v := commented[k]
			assert.NotEmpty(t, v, "node.env.example: #%s is empty: show a value to uncomment", k)
			assert.False(t, strings.ContainsAny(v, `"' `), "node.env.example: #%s=%s: no quotes or spaces, systemd keeps them", k, v)
		}
	})

	t.Run("the unit runs the node with that file", func(t *testing.T) {
		argv := strings.Fields(one(t, "ExecStart"))
		require.NotEmpty(t, argv)
		assert.Equal(t, "/usr/local/bin/gostream-node", argv[0])
		assert.Len(t, argv, 1, "ExecStart: the configuration comes from the EnvironmentFile only")
		assert.Equal(t, "/etc/gostream/node.env", strings.TrimPrefix(one(t, "EnvironmentFile"), "-"))
		assert.Equal(t, "gostream", one(t, "User"))
		assert.Equal(t, "on-failure", one(t, "Restart"))
		// systemctl reload gostream-node: SIGHUP reads the TLS, tokens and
		// gossip key files again.
		assert.Equal(t, "/bin/kill -HUP $MAINPID", one(t, "ExecReload"))
		assert.NotEmpty(t, one(t, "LimitNOFILE"))
		assert.Equal(t, "yes", one(t, "NoNewPrivileges"))
		assert.Equal(t, "strict", one(t, "ProtectSystem"))
	})

	t.Run("the data directory is writable under ProtectSystem=strict", func(t *testing.T) {
		dataDir := filepath.Clean(env["GOSTREAM_DATA_DIR"])
		writable := strings.Fields(strings.Join(service["ReadWritePaths"], " "))
		for _, d := range service["StateDirectory"] {
			writable = append(writable, "/var/lib/"+d)
		}
		assert.True(t, slices.ContainsFunc(writable, func(w string) bool {
			w = filepath.Clean(strings.TrimPrefix(w, "-"))
			return dataDir == w || strings.HasPrefix(dataDir, w+"/")
		}), "GOSTREAM_DATA_DIR %s is not under ReadWritePaths or StateDirectory %v", dataDir, writable)
	})

	t.Run("systemd-analyze verify", func(t *testing.T) {
		analyze, err := exec.LookPath("systemd-analyze")
		if err != nil {
			t.Skip("systemd-analyze is not installed")
		}
		// verify wants ExecStart's binary to exist: point it at a built one.
		bin := filepath.Join(t.TempDir(), "gostream-node")
		build := exec.Command("go", "build", "-o", bin, "./cmd/node")
		build.Dir = moduleRoot(t)
		out, err := build.CombinedOutput()
		require.NoError(t, err, "go build ./cmd/node:\n%s", out)
		text, err := os.ReadFile("gostream-node.service")
		require.NoError(t, err)
		copied := filepath.Join(t.TempDir(), "gostream-node.service")
		require.NoError(t, os.WriteFile(copied,
			[]byte(strings.Replace(string(text), "ExecStart=/usr/local/bin/gostream-node", "ExecStart="+bin, 1)), 0o644))
		out, err = exec.Command(analyze, "verify", copied).CombinedOutput()
		assert.NoError(t, err, "systemd-analyze verify:\n%s", out)
		assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify has remarks")
	})
}
