package deploy_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadCompose loads docker-compose.yml the way `docker compose` does (schema
// validation, normalization, consistency checks), with the given profiles
// active and an empty environment, so the result does not depend on the
// machine running the test.
func loadCompose(t *testing.T, root string, profiles ...string) *types.Project {
	t.Helper()
	return loadComposeFiles(t, root, []string{"docker-compose.yml"}, profiles...)
}

// loadComposeFiles loads files (relative to root) as `docker compose -f A
// -f B ...` does: each later file overrides the ones before it, and
// relative paths are relative to root, the first file's directory.
func loadComposeFiles(t *testing.T, root string, files []string, profiles ...string) *types.Project {
	t.Helper()
	return loadComposeEnv(t, root, files, nil, profiles...)
}

// loadComposeEnv is loadComposeFiles with env (NAME=value) as the
// environment of docker compose, for the variables the files interpolate.
func loadComposeEnv(t *testing.T, root string, files, env []string, profiles ...string) *types.Project {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(root, f))
	}
	opts, err := cli.NewProjectOptions(
		paths,
		cli.WithWorkingDirectory(root),
		cli.WithProfiles(profiles),
		cli.WithEnv(env),
	)
	require.NoError(t, err)
	p, err := opts.LoadProject(context.Background())
	require.NoError(t, err, "%s is not a valid compose project", strings.Join(files, " + "))
	return p
}

// composeNode is a node service of docker-compose.yml with its addresses:
// listen and advert are its internal RPC listener's (the nodes' own), ext
// and extAdvert its external one's; kafka and kafkaAdvert, kafkaExt and
// kafkaExtAdvert the same for Kafka's protocol.
type composeNode struct {
	service                  string
	id                       int
	env                      map[string]string
	listen, advert           hostPort
	ext, extAdvert           hostPort
	kafka, kafkaAdvert       hostPort
	kafkaExt, kafkaExtAdvert hostPort
	gossip                   hostPort
	http                     hostPort
	svc                      types.ServiceConfig
}

// parseListeners reads NAME://HOST:PORT,... into the internal and
// external listeners, failing on anything else: every node has exactly
// those two of each protocol.
func parseListeners(t *testing.T, where, s string) (internal, external hostPort) {
	t.Helper()
	byName := map[string]hostPort{}
	var names []string
	for _, item := range strings.Split(s, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(item), "://")
		require.True(t, ok, "%s %q: want NAME://HOST:PORT,...", where, s)
		hp, err := parseHostPort(addr)
		require.NoError(t, err, "%s %q", where, s)
		byName[name] = hp
		names = append(names, name)
	}
	require.Equal(t, []string{"internal", "external"}, names, "%s %q: the listeners internal (first: the nodes' own) and external", where, s)
	return byName["internal"], byName["external"]
}

type hostPort struct {
	host string
	port int
}

func (h hostPort) String() string { return net.JoinHostPort(h.host, strconv.Itoa(h.port)) }

func parseHostPort(s string) (hostPort, error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return hostPort{}, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port <= 0 || port > 65535 {
		return hostPort{}, fmt.Errorf("%q: port is not a number from 1 to 65535", s)
	}
	return hostPort{host: host, port: port}, nil
}

// bindsAll reports whether host is a wildcard address: in a container the
// node must accept connections on the network's interface, not loopback.
func bindsAll(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

// serviceEnv returns a service's environment, failing on a variable whose
// value would come from the environment of whoever runs docker compose.
func serviceEnv(t *testing.T, svc types.ServiceConfig) map[string]string {
	t.Helper()
	env := map[string]string{}
	for k, v := range svc.Environment {
		require.NotNil(t, v, "service %s: %s has no value in the file", svc.Name, k)
		env[k] = *v
	}
	return env
}

func TestComposeFile(t *testing.T) {
	root := moduleRoot(t)
	nodeVars := envVarsOf(t, "node")
	ctlVars := envVarsOf(t, "ctl")
	bins := requireDockerBinaries(t, readDockerfile(t, filepath.Join(root, "Dockerfile")))
	docker := readDockerfile(t, filepath.Join(root, "Dockerfile"))
	project := loadCompose(t, root, "tools")

	// The node services are those that set GOSTREAM_ID; the only other
	// service is ctl.
	nodes := map[string]*composeNode{}
	var names []string
	for name, svc := range project.Services {
		if name == "ctl" {
			continue
		}
		env := serviceEnv(t, svc)
		idText, ok := env["GOSTREAM_ID"]
		require.True(t, ok, "service %s sets no GOSTREAM_ID: every service but ctl must be a gostream node", name)
		id, err := strconv.Atoi(idText)
		require.NoError(t, err, "service %s: GOSTREAM_ID %q", name, idText)
		n := &composeNode{service: name, id: id, env: env, svc: svc}
		for _, a := range []struct {
			dst *hostPort
			key string
		}{{&n.gossip, "GOSTREAM_GOSSIP"}, {&n.http, "GOSTREAM_HTTP"}} {
			require.Contains(t, env, a.key, "service %s", name)
			*a.dst, err = parseHostPort(env[a.key])
			require.NoError(t, err, "service %s: %s", name, a.key)
		}
		for _, l := range []struct {
			internal, external *hostPort
			key                string
		}{
			{&n.listen, &n.ext, "GOSTREAM_LISTEN"}, {&n.advert, &n.extAdvert, "GOSTREAM_ADVERTISE"},
			{&n.kafka, &n.kafkaExt, "GOSTREAM_KAFKA_LISTEN"}, {&n.kafkaAdvert, &n.kafkaExtAdvert, "GOSTREAM_KAFKA_ADVERTISE"},
		} {
			require.Contains(t, env, l.key, "service %s", name)
			*l.internal, *l.external = parseListeners(t, "service "+name+": "+l.key, env[l.key])
		}
		nodes[name] = n
		names = append(names, name)
	}
	slices.Sort(names)
	require.Len(t, nodes, 3, "want exactly three node services, have %v", names)
	nodeByID := map[int]*composeNode{}
	for _, n := range nodes {
		require.NotContains(t, nodeByID, n.id, "GOSTREAM_ID %d is used by %s and %s", n.id, n.service, nodeByID[n.id])
		nodeByID[n.id] = n
	}

	t.Run("every GOSTREAM variable is a flag of its binary", func(t *testing.T) {
		for _, name := range names {
			requireFlagVars(t, "gostream-node", nodeVars, "service "+name, slices.Sorted(maps.Keys(nodes[name].env)))
		}
		ctl, err := project.GetService("ctl")
		require.NoError(t, err)
		requireFlagVars(t, "gostream-ctl", ctlVars, "service ctl", slices.Sorted(maps.Keys(serviceEnv(t, ctl))))
	})

	t.Run("addresses", func(t *testing.T) {
		for _, name := range names {
			n := nodes[name]
			for _, a := range []struct {
				key string
				hp  hostPort
			}{{"GOSTREAM_LISTEN", n.listen}, {"GOSTREAM_LISTEN", n.ext}, {"GOSTREAM_KAFKA_LISTEN", n.kafka}, {"GOSTREAM_KAFKA_LISTEN", n.kafkaExt},
				{"GOSTREAM_GOSSIP", n.gossip}, {"GOSTREAM_HTTP", n.http}} {
				// Gossip especially: memberlist advertises the bind host, so a
				// wildcard makes it pick the container's own address.
				assert.True(t, bindsAll(a.hp.host), "service %s: %s=%s must bind 0.0.0.0 inside the container", name, a.key, a.hp)
			}
			assert.Equal(t, hostPort{host: name, port: n.listen.port}, n.advert,
				"service %s: GOSTREAM_ADVERTISE's internal listener must be its service name and its internal port, the address other containers dial", name)
			assert.Equal(t, hostPort{host: name, port: n.kafka.port}, n.kafkaAdvert,
				"service %s: GOSTREAM_KAFKA_ADVERTISE's internal listener must be its service name and its internal Kafka port", name)
			assert.Equal(t, "127.0.0.1", n.extAdvert.host, "service %s: the external RPC listener is advertised at the host's loopback by default", name)
			assert.Equal(t, "127.0.0.1", n.kafkaExtAdvert.host, "service %s: the external Kafka listener is advertised at the host's loopback by default", name)
			ports := []int{n.listen.port, n.ext.port, n.kafka.port, n.kafkaExt.port, n.gossip.port, n.http.port}
			assert.Len(t, slices.Compact(slices.Sorted(slices.Values(ports))), len(ports), "service %s: two listeners on one port: %v", name, ports)
		}
	})

	t.Run("controller", func(t *testing.T) {
		var controllers []string
		for _, name := range names {
			c := nodes[name].env["GOSTREAM_CONTROLLER"]
			require.NotEmpty(t, c, "service %s sets no GOSTREAM_CONTROLLER: it would run a cluster of one", name)
			controllers = append(controllers, c)
		}
		require.Len(t, slices.Compact(slices.Clone(controllers)), 1, "all nodes must name the same controller: %v", controllers)
		entries := strings.Split(controllers[0], ",")
		assert.Len(t, entries, 3, "GOSTREAM_CONTROLLER %q: three candidates, so that the cluster survives its controller's loss", controllers[0])
		for _, entry := range entries {
			idText, addr, ok := strings.Cut(entry, "@")
			require.True(t, ok, "GOSTREAM_CONTROLLER entry %q: want ID@HOST:PORT", entry)
			id, err := strconv.Atoi(idText)
			require.NoError(t, err, "GOSTREAM_CONTROLLER entry %q: want ID@HOST:PORT", entry)
			hp, err := parseHostPort(addr)
			require.NoError(t, err, "GOSTREAM_CONTROLLER entry %q", entry)
			ctrl, ok := nodes[hp.host]
			require.True(t, ok, "GOSTREAM_CONTROLLER entry %q: host %q is not a node service of the file (%v)", entry, hp.host, names)
			assert.Equal(t, id, ctrl.id, "GOSTREAM_CONTROLLER entry %q names service %s, whose GOSTREAM_ID is %d", entry, hp.host, ctrl.id)
			assert.Equal(t, ctrl.listen.port, hp.port, "GOSTREAM_CONTROLLER entry %q: the port must be %s's RPC port", entry, hp.host)
		}
	})

	t.Run("gossip seeds", func(t *testing.T) {
		for _, name := range names {
			n := nodes[name]
			var seeded []string
			for _, seed := range strings.Split(n.env["GOSTREAM_JOIN"], ",") {
				hp, err := parseHostPort(strings.TrimSpace(seed))
				require.NoError(t, err, "service %s: GOSTREAM_JOIN %q", name, n.env["GOSTREAM_JOIN"])
				other, ok := nodes[hp.host]
				require.True(t, ok, "service %s: GOSTREAM_JOIN seed %s is not a node service of the file (%v)", name, hp, names)
				assert.NotEqual(t, name, hp.host, "service %s: joins itself", name)
				assert.Equal(t, other.gossip.port, hp.port, "service %s: seed %s must use %s's gossip port", name, hp, hp.host)
				seeded = append(seeded, hp.host)
			}
			// Every other node is a seed, so that a node can join while any one
			// of the others is down.
			var others []string
			for _, o := range names {
				if o != name {
					others = append(others, o)
				}
			}
			slices.Sort(seeded)
			assert.Equal(t, others, seeded, "service %s: GOSTREAM_JOIN must list the other nodes", name)
		}
	})

	t.Run("data on a named volume", func(t *testing.T) {
		seen := map[string]string{}
		for _, name := range names {
			n := nodes[name]
			dataDir := n.env["GOSTREAM_DATA_DIR"]
			require.NotEmpty(t, dataDir, "service %s sets no GOSTREAM_DATA_DIR", name)
			i := slices.IndexFunc(n.svc.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == dataDir })
			require.GreaterOrEqual(t, i, 0, "service %s mounts nothing at its GOSTREAM_DATA_DIR %s", name, dataDir)
			v := n.svc.Volumes[i]
			assert.Equal(t, types.VolumeTypeVolume, v.Type, "service %s: %s must be a named volume", name, dataDir)
			assert.Contains(t, project.Volumes, v.Source, "service %s: volume %q is not declared under volumes:", name, v.Source)
			assert.False(t, v.ReadOnly, "service %s: %s is read-only", name, dataDir)
			if other, dup := seen[v.Source]; dup {
				t.Errorf("services %s and %s share volume %s: a storage root belongs to one node", other, name, v.Source)
			}
			seen[v.Source] = name
			assert.Contains(t, docker.volumes, dataDir, "the Dockerfile declares no VOLUME %s", dataDir)
		}
	})

	t.Run("healthchecks", func(t *testing.T) {
		for _, name := range names {
			n := nodes[name]
			hc := n.svc.HealthCheck
			require.NotNil(t, hc, "service %s has no healthcheck", name)
			require.False(t, hc.Disable, "service %s: healthcheck disabled", name)
			require.NotEmpty(t, hc.Test, "service %s: empty healthcheck", name)
			var argv []string
			switch hc.Test[0] {
			case "CMD":
				argv = hc.Test[1:]
			case "CMD-SHELL":
				argv = strings.Fields(strings.Join(hc.Test[1:], " "))
			default:
				t.Fatalf("service %s: healthcheck %q: want CMD or CMD-SHELL", name, hc.Test)
			}
			require.NotEmpty(t, argv, "service %s: empty healthcheck", name)
			assert.Contains(t, []string{bins.node, bins.ctl}, argv[0],
				"service %s: the healthcheck runs %s, which the Dockerfile does not put in the image", name, argv[0])
			// It must ask this node's own HTTP port.
			want := strconv.Itoa(n.http.port)
			assert.True(t, slices.ContainsFunc(argv, func(a string) bool {
				hp, err := parseHostPort(strings.TrimPrefix(strings.TrimPrefix(a, "http://"), "--http="))
				return err == nil && (hp.host == "127.0.0.1" || hp.host == "localhost") && strconv.Itoa(hp.port) == want
			}), "service %s: healthcheck %q does not ask 127.0.0.1:%s, its GOSTREAM_HTTP port", name, hc.Test, want)
		}
	})

	t.Run("image", func(t *testing.T) {
		for _, name := range append(slices.Clone(names), "ctl") {
			svc, err := project.GetService(name)
			require.NoError(t, err)
			require.NotNil(t, svc.Build, "service %s is not built from the Dockerfile", name)
			assert.Equal(t, root, svc.Build.Context, "service %s: build context", name)
			assert.Equal(t, "Dockerfile", filepath.Base(svc.Build.Dockerfile), "service %s: Dockerfile", name)
		}
		for _, name := range names {
			n := nodes[name]
			assert.Empty(t, n.svc.Entrypoint, "service %s must keep the image's ENTRYPOINT, gostream-node", name)
			assert.Empty(t, n.svc.Command, "service %s: gostream-node takes its configuration from GOSTREAM_* only", name)
			for _, p := range []string{
				fmt.Sprintf("%d/tcp", n.listen.port),
				fmt.Sprintf("%d/tcp", n.ext.port),
				fmt.Sprintf("%d/tcp", n.kafka.port),
				fmt.Sprintf("%d/tcp", n.kafkaExt.port),
				fmt.Sprintf("%d/tcp", n.gossip.port),
				fmt.Sprintf("%d/udp", n.gossip.port),
				fmt.Sprintf("%d/tcp", n.http.port),
			} {
				assert.True(t, docker.exposed[p], "service %s uses %s, which the Dockerfile does not EXPOSE", name, p)
			}
		}
	})

	// Each node publishes three ports on the host: HTTP, and its external
	// RPC and Kafka listeners, each advertised at the port published for
	// it, so that a client on the host dials what it is told.
	type publishedPorts struct{ http, rpc, kafka types.ServicePortConfig }
	published := func(t *testing.T, p *types.Project) map[int]publishedPorts {
		t.Helper()
		byID := map[int]publishedPorts{}
		seen := map[string]string{}
		for id, n := range nodeByID {
			svc, err := p.GetService(n.service)
			require.NoError(t, err)
			require.Len(t, svc.Ports, 3, "service %s publishes its HTTP port and its external RPC and Kafka listeners, nothing else", n.service)
			var pp publishedPorts
			for _, port := range svc.Ports {
				key := port.HostIP + ":" + port.Published
				if other, dup := seen[key]; dup {
					t.Errorf("services %s and %s both publish host port %s", other, n.service, key)
				}
				seen[key] = n.service
				switch port.Target {
				case uint32(n.http.port):
					pp.http = port
				case uint32(n.ext.port):
					pp.rpc = port
				case uint32(n.kafkaExt.port):
					pp.kafka = port
				default:
					t.Errorf("service %s publishes container port %d: only HTTP and the external listeners are for outside", n.service, port.Target)
				}
			}
			env := serviceEnv(t, svc)
			_, extAdvert := parseListeners(t, "service "+n.service+": GOSTREAM_ADVERTISE", env["GOSTREAM_ADVERTISE"])
			assert.Equal(t, pp.rpc.Published, strconv.Itoa(extAdvert.port), "service %s: its external RPC listener is advertised at the port published for it", n.service)
			if env["GOSTREAM_KAFKA_LISTEN"] != "" { // the secure override turns Kafka off
				_, kafkaExtAdvert := parseListeners(t, "service "+n.service+": GOSTREAM_KAFKA_ADVERTISE", env["GOSTREAM_KAFKA_ADVERTISE"])
				assert.Equal(t, pp.kafka.Published, strconv.Itoa(kafkaExtAdvert.port), "service %s: its external Kafka listener is advertised at the port published for it", n.service)
			}
			assert.Equal(t, pp.rpc.HostIP, pp.http.HostIP, "service %s", n.service)
			assert.Equal(t, pp.kafka.HostIP, pp.http.HostIP, "service %s", n.service)
			byID[id] = pp
		}
		return byID
	}
	t.Run("published ports default to make run's and the external ones", func(t *testing.T) {
		for id, p := range published(t, project) {
			assert.Equal(t, "127.0.0.1", p.http.HostIP, "node %d publishes on the host's loopback only", id)
			assert.Equal(t, strconv.Itoa(9402+10*(id-1)), p.http.Published, "node %d's HTTP port on the host", id)
			assert.Equal(t, strconv.Itoa(19400+10*(id-1)), p.rpc.Published, "node %d's external RPC port on the host", id)
			assert.Equal(t, strconv.Itoa(19092+(id-1)), p.kafka.Published, "node %d's external Kafka port on the host", id)
		}
	})
	t.Run("published ports follow NODEn_*_PORT, PUBLISH_ADDR and EXTERNAL_HOST", func(t *testing.T) {
		env := []string{"PUBLISH_ADDR=0.0.0.0", "EXTERNAL_HOST=streams.example.net"}
		for id := range nodeByID {
			env = append(env, fmt.Sprintf("NODE%d_HTTP_PORT=%d", id, 29402+10*(id-1)),
				fmt.Sprintf("NODE%d_RPC_PORT=%d", id, 29400+10*(id-1)), fmt.Sprintf("NODE%d_KAFKA_PORT=%d", id, 29092+(id-1)))
		}
		moved := loadComposeEnv(t, root, []string{"docker-compose.yml"}, env, "tools")
		for id, p := range published(t, moved) {
			assert.Equal(t, "0.0.0.0", p.http.HostIP, "node %d: PUBLISH_ADDR", id)
			assert.Equal(t, strconv.Itoa(29402+10*(id-1)), p.http.Published, "node %d: NODE%d_HTTP_PORT sets its HTTP port on the host", id, id)
			assert.Equal(t, strconv.Itoa(29400+10*(id-1)), p.rpc.Published, "node %d: NODE%d_RPC_PORT", id, id)
			assert.Equal(t, strconv.Itoa(29092+(id-1)), p.kafka.Published, "node %d: NODE%d_KAFKA_PORT", id, id)
			assert.Equal(t, uint32(nodeByID[id].http.port), p.http.Target, "node %d: the container port stays its GOSTREAM_HTTP port", id)
			svc, err := moved.GetService(nodeByID[id].service)
			require.NoError(t, err)
			menv := serviceEnv(t, svc)
			_, extAdvert := parseListeners(t, "GOSTREAM_ADVERTISE", menv["GOSTREAM_ADVERTISE"])
			_, kafkaExtAdvert := parseListeners(t, "GOSTREAM_KAFKA_ADVERTISE", menv["GOSTREAM_KAFKA_ADVERTISE"])
			assert.Equal(t, "streams.example.net", extAdvert.host, "node %d: EXTERNAL_HOST", id)
			assert.Equal(t, "streams.example.net", kafkaExtAdvert.host, "node %d: EXTERNAL_HOST", id)
		}
		secure := loadComposeEnv(t, root, []string{"docker-compose.yml", secureFile}, env, "tools")
		for id, p := range published(t, secure) {
			assert.Equal(t, strconv.Itoa(29402+10*(id-1)), p.http.Published, "node %d with %s", id, secureFile)
		}
	})

	t.Run("ctl", func(t *testing.T) {
		ctl, err := project.GetService("ctl")
		require.NoError(t, err, "no ctl service")
		assert.Equal(t, []string{"tools"}, ctl.Profiles, "ctl belongs to the tools profile, so `docker compose up` leaves it out")
		require.NotEmpty(t, ctl.Entrypoint, "ctl must run gostream-ctl")
		assert.Equal(t, bins.ctl, ctl.Entrypoint[0], "ctl's entrypoint must be gostream-ctl as the Dockerfile installs it")
		assert.Empty(t, ctl.DependsOn, "ctl must not depend on the nodes: running it would restart a node stopped on purpose")
		env := serviceEnv(t, ctl)
		var bootstrap []string
		for _, addr := range strings.Split(env["GOSTREAM_BOOTSTRAP"], ",") {
			hp, err := parseHostPort(strings.TrimSpace(addr))
			require.NoError(t, err, "ctl: GOSTREAM_BOOTSTRAP %q", env["GOSTREAM_BOOTSTRAP"])
			n, ok := nodes[hp.host]
			require.True(t, ok, "ctl: GOSTREAM_BOOTSTRAP address %s is not a node service of the file", hp)
			assert.Equal(t, n.advert, hp, "ctl: GOSTREAM_BOOTSTRAP address %s must be %s's RPC address", hp, hp.host)
			bootstrap = append(bootstrap, hp.host)
		}
		slices.Sort(bootstrap)
		assert.Equal(t, names, bootstrap, "ctl: GOSTREAM_BOOTSTRAP must list every node")

		// Without the tools profile, `docker compose up` starts the nodes only.
		plain := loadCompose(t, root)
		assert.ElementsMatch(t, names, plain.ServiceNames())
		assert.Contains(t, plain.DisabledServiceNames(), "ctl")
	})
}

// The security variables of gostream-node and gostream-ctl
// (docs/security.md).
const (
	envTLSCert        = "GOSTREAM_TLS_CERT"
	envTLSKey         = "GOSTREAM_TLS_KEY"
	envTLSCA          = "GOSTREAM_TLS_CA"
	envGossipKeyFile  = "GOSTREAM_GOSSIP_KEY_FILE"
	envAuthTokensFile = "GOSTREAM_AUTH_TOKENS_FILE"
	envSuperusers     = "GOSTREAM_SUPERUSERS"
	envTokenFile      = "GOSTREAM_TOKEN_FILE"
)

// secureFile is the override of docker-compose.yml that turns security on.
const secureFile = "deploy/docker-compose.secure.yml"

// fileMount returns the bind mount of svc whose target holds path, failing
// when there is none: a file a variable names must be in the container.
func fileMount(t *testing.T, svc types.ServiceConfig, key, path string) types.ServiceVolumeConfig {
	t.Helper()
	require.True(t, filepath.IsAbs(path), "service %s: %s=%s must be an absolute path in the container", svc.Name, key, path)
	i := slices.IndexFunc(svc.Volumes, func(v types.ServiceVolumeConfig) bool {
		return strings.HasPrefix(path, strings.TrimSuffix(v.Target, "/")+"/")
	})
	require.GreaterOrEqual(t, i, 0, "service %s: %s=%s is under no volume of the service", svc.Name, key, path)
	return svc.Volumes[i]
}

func TestComposeSecureOverride(t *testing.T) {
	root := moduleRoot(t)
	nodeVars := envVarsOf(t, "node")
	ctlVars := envVarsOf(t, "ctl")
	plain := loadCompose(t, root, "tools")
	project := loadComposeFiles(t, root, []string{"docker-compose.yml", secureFile}, "tools")
	assert.ElementsMatch(t, plain.ServiceNames(), project.ServiceNames(), "%s adds or drops services", secureFile)

	var names []string
	for name, svc := range project.Services {
		if _, ok := serviceEnv(t, svc)["GOSTREAM_ID"]; ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	require.Len(t, names, 3, "want the three node services of docker-compose.yml, have %v", names)

	// The files: one read-only bind mount, the same on every service, of a
	// directory under data/, which .dockerignore keeps out of the build
	// context (ca.key is in it).
	var source string
	mountOf := func(t *testing.T, svc types.ServiceConfig, key, path string) {
		t.Helper()
		v := fileMount(t, svc, key, path)
		assert.Equal(t, types.VolumeTypeBind, v.Type, "service %s: %s: the files are a bind mount", svc.Name, v.Target)
		assert.True(t, v.ReadOnly, "service %s: %s must be read-only", svc.Name, v.Target)
		rel, err := filepath.Rel(root, v.Source)
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(rel, "data"+string(filepath.Separator)),
			"service %s: %s mounts %s, which is not under data/: the build context would hold the CA's key", svc.Name, v.Target, v.Source)
		if source == "" {
			source = v.Source
		}
		assert.Equal(t, source, v.Source, "service %s: every service mounts the same files", svc.Name)
	}

	t.Run("every node gets TLS, the CA, the gossip key, the tokens and the superusers", func(t *testing.T) {
		shared := map[string][]string{}
		certs := map[string]string{}
		for _, name := range names {
			svc, err := project.GetService(name)
			require.NoError(t, err)
			env := serviceEnv(t, svc)
			requireFlagVars(t, "gostream-node", nodeVars, "service "+name+" (with "+secureFile+")", slices.Sorted(maps.Keys(env)))
			for _, key := range []string{envTLSCert, envTLSKey, envTLSCA, envGossipKeyFile, envAuthTokensFile, envSuperusers} {
				require.NotEmpty(t, env[key], "service %s sets no %s", name, key)
			}
			for _, key := range []string{envTLSCert, envTLSKey, envTLSCA, envGossipKeyFile, envAuthTokensFile} {
				mountOf(t, svc, key, env[key])
			}
			for _, key := range []string{envTLSCA, envGossipKeyFile, envAuthTokensFile, envSuperusers} {
				shared[key] = append(shared[key], env[key])
			}
			// Its certificate is its own, named as gostream-ctl cert init
			// names it: the service name, which is its Common Name.
			assert.Equal(t, name+".crt", filepath.Base(env[envTLSCert]), "service %s: its certificate", name)
			assert.Equal(t, name+".key", filepath.Base(env[envTLSKey]), "service %s: its key", name)
			certs[env[envTLSCert]] = name

			// The base file's settings stay: the override adds only.
			assert.NotEmpty(t, env["GOSTREAM_CONTROLLER"], "service %s lost GOSTREAM_CONTROLLER", name)
			assert.True(t, slices.ContainsFunc(svc.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == env["GOSTREAM_DATA_DIR"] }),
				"service %s lost the volume of its GOSTREAM_DATA_DIR", name)
		}
		assert.Len(t, certs, len(names), "two nodes share a certificate")
		for key, values := range shared {
			assert.Len(t, slices.Compact(slices.Clone(values)), 1, "%s differs between the nodes: %v", key, values)
		}
		// Nodes act for each other: each one's certificate name must be a
		// superuser, or it refuses to start.
		superusers := strings.Split(shared[envSuperusers][0], ",")
		for _, name := range names {
			assert.Contains(t, superusers, name, "GOSTREAM_SUPERUSERS must list node %s's certificate name", name)
		}
		assert.Greater(t, len(superusers), len(names), "GOSTREAM_SUPERUSERS names no administrator besides the nodes")
	})

	t.Run("the healthcheck speaks TLS", func(t *testing.T) {
		// gostream-ctl health in the node's container reads the node's
		// GOSTREAM_TLS_* variables: they must be gostream-ctl's too.
		for _, key := range []string{envTLSCA, envTLSCert, envTLSKey} {
			assert.True(t, ctlVars[key], "%s is no variable of gostream-ctl: the healthcheck would ask a TLS node in plaintext", key)
		}
		for _, name := range names {
			svc, err := project.GetService(name)
			require.NoError(t, err)
			require.NotNil(t, svc.HealthCheck, "service %s has no healthcheck", name)
			assert.Contains(t, svc.HealthCheck.Test, "health", "service %s: the healthcheck is gostream-ctl health", name)
		}
	})

	t.Run("ctl uses the CA and a superuser's token", func(t *testing.T) {
		ctl, err := project.GetService("ctl")
		require.NoError(t, err)
		env := serviceEnv(t, ctl)
		requireFlagVars(t, "gostream-ctl", ctlVars, "service ctl (with "+secureFile+")", slices.Sorted(maps.Keys(env)))
		for _, key := range []string{envTLSCA, envTokenFile} {
			require.NotEmpty(t, env[key], "service ctl sets no %s", key)
			mountOf(t, ctl, key, env[key])
		}
		node, err := project.GetService(names[0])
		require.NoError(t, err)
		assert.Equal(t, serviceEnv(t, node)[envTLSCA], env[envTLSCA], "ctl must verify the nodes against their CA")
		assert.NotEmpty(t, env["GOSTREAM_BOOTSTRAP"], "service ctl lost GOSTREAM_BOOTSTRAP")
		assert.Equal(t, []string{"tools"}, ctl.Profiles, "ctl stays in the tools profile")
	})

	t.Run("docker-compose.yml alone stays plaintext", func(t *testing.T) {
		for _, svc := range plain.Services {
			for _, key := range []string{envTLSCert, envTLSKey, envTLSCA, envGossipKeyFile, envAuthTokensFile, envSuperusers, envTokenFile} {
				assert.NotContains(t, serviceEnv(t, svc), key, "service %s of docker-compose.yml sets %s: security belongs to %s", svc.Name, key, secureFile)
			}
		}
	})
}
