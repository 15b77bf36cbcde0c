package deploy_test

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// dockerfile is what the tests need to know of the Dockerfile: where the
// final stage puts the binaries and how it runs them. It is read by a small
// parser that knows line continuations, comments and stages, enough for a
// plain Dockerfile like ours.
type dockerfile struct {
	// binaryPath maps a command package ("./cmd/node") to the path its
	// binary has in the final image.
	binaryPath map[string]string
	// entrypoint is the final stage's ENTRYPOINT, nil unless in exec form.
	entrypoint []string
	// exposed holds the final stage's EXPOSE entries as "9400/tcp".
	exposed map[string]bool
	// volumes holds the final stage's VOLUME paths.
	volumes []string
	// user is the final stage's USER.
	user string
}

// instruction is one Dockerfile instruction: its keyword in upper case and
// the rest of the (continued) line.
type instruction struct {
	keyword string
	args    string
}

func parseInstructions(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		keyword, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instruction{keyword: strings.ToUpper(keyword), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// jsonOrFields reads an instruction's arguments in exec form (a JSON array)
// or, failing that, as space-separated words. exec tells which it was.
func jsonOrFields(args string) (words []string, exec bool) {
	if err := json.Unmarshal([]byte(args), &words); err == nil {
		return words, true
	}
	return strings.Fields(args), false
}

func readDockerfile(t *testing.T, file string) dockerfile {
	t.Helper()
	text, err := os.ReadFile(file)
	require.NoError(t, err)

	built := map[string]string{} // build output path -> command package
	var copies [][2]string       // final stage: COPY --from source, destination
	var d dockerfile
	for _, in := range parseInstructions(string(text)) {
		switch in.keyword {
		case "FROM": // a new stage: only the last one's settings make the image
			copies, d = nil, dockerfile{}
		case "RUN":
			for _, cmd := range strings.Split(in.args, "&&") {
				f := strings.Fields(cmd)
				if len(f) < 2 || f[0] != "go" || f[1] != "build" {
					continue
				}
				var out, pkg string
				for i, w := range f {
					if w == "-o" && i+1 < len(f) {
						out = f[i+1]
					}
					if strings.HasPrefix(w, "./cmd/") {
						pkg = w
					}
				}
				if out != "" && pkg != "" {
					built[out] = pkg
				}
			}
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") {
				copies = append(copies, [2]string{f[1], f[2]})
			}
		case "ENTRYPOINT":
			if words, exec := jsonOrFields(in.args); exec {
				d.entrypoint = words
			}
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				if d.exposed == nil {
					d.exposed = map[string]bool{}
				}
				d.exposed[p] = true
			}
		case "VOLUME":
			words, _ := jsonOrFields(in.args)
			d.volumes = append(d.volumes, words...)
		case "USER":
			d.user = in.args
		}
	}
	d.binaryPath = map[string]string{}
	for _, c := range copies {
		if pkg, ok := built[c[0]]; ok {
			dst := c[1]
			if strings.HasSuffix(dst, "/") {
				dst += path.Base(c[0])
			}
			d.binaryPath[pkg] = dst
		}
	}
	return d
}

// dockerBinaries are the paths of the two binaries in the image.
type dockerBinaries struct{ node, ctl string }

func TestDockerfile(t *testing.T) {
	d := readDockerfile(t, filepath.Join(moduleRoot(t), "Dockerfile"))
	bins := requireDockerBinaries(t, d)
	require.Equal(t, "gostream-node", path.Base(bins.node))
	require.Equal(t, "gostream-ctl", path.Base(bins.ctl))
	// Exec form, so that gostream-node is PID 1 and `docker stop` (SIGTERM)
	// reaches it and stops it cleanly, rather than killing a shell.
	require.NotEmpty(t, d.entrypoint, "the final stage needs ENTRYPOINT in exec form, [\"%s\"]", bins.node)
	require.Equal(t, bins.node, d.entrypoint[0], "ENTRYPOINT runs gostream-node")
	require.NotEmpty(t, d.user, "the image runs as a USER of its own")
	require.NotContains(t, []string{"root", "0", "0:0", "root:root"}, d.user, "the image must not run as root")
}

// requireDockerBinaries returns where the final stage of d puts the
// binaries built from ./cmd/node and ./cmd/ctl; it fails if either is
// missing.
func requireDockerBinaries(t *testing.T, d dockerfile) dockerBinaries {
	t.Helper()
	b := dockerBinaries{node: d.binaryPath["./cmd/node"], ctl: d.binaryPath["./cmd/ctl"]}
	require.NotEmpty(t, b.node, "the Dockerfile builds ./cmd/node with go build -o OUT and copies OUT into the final stage")
	require.NotEmpty(t, b.ctl, "the Dockerfile builds ./cmd/ctl with go build -o OUT and copies OUT into the final stage")
	require.True(t, path.IsAbs(b.node) && path.IsAbs(b.ctl), "binaries at absolute paths: %+v", b)
	return b
}
