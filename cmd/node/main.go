// Command gostream-node runs one gostream broker node. Its flags, their
// environment twins and its exit statuses are the contract of docs/cli.md; see
// gostream-node --help.
package main

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"

	"gostream/cmd/internal/exitcode"
	"gostream/controller/quorum"
	"gostream/metadata"
	"gostream/node"
	"gostream/security"
	"gostream/storage"
	"gostream/transport"
)

// version is the release this binary was built from, set at build time with
// -ldflags "-X main.version=...".
var version = "dev"

// Flag names. Each has the environment twin envName(name).
const (
	flagID             = "id"
	flagDataDir        = "data-dir"
	flagListen         = "listen"
	flagKafkaListen    = "kafka-listen"
	flagKafkaAdvertise = "kafka-advertise"
	flagAutoCreate     = "auto-create-topics"
	flagAutoPartitions = "auto-create-partitions"
	flagAutoRF         = "auto-create-replication-factor"
	flagRack           = "rack"
	flagAdvertise      = "advertise"
	flagGossip         = "gossip"
	flagJoin           = "join"
	flagDialSource     = "dial-source"
	flagHTTP           = "http"
	flagUI             = "ui"
	flagController     = "controller"
	flagLogLevel       = "log-level"
	flagLogFormat      = "log-format"

	flagMaxBatchBytes        = "max-batch-bytes"
	flagRequestMemory        = "request-memory"
	flagRequestMemoryPerConn = "request-memory-per-conn"
	flagMaxConns             = "max-conns"
	flagMaxConnsPerIP        = "max-conns-per-ip"
	flagIdleTimeout          = "idle-timeout"

	flagRetentionBytes         = "retention-bytes"
	flagRetentionMs            = "retention-ms"
	flagSegmentBytes           = "segment-bytes"
	flagSegmentMs              = "segment-ms"
	flagRetentionCheckInterval = "retention-check-interval"
	flagOffsetsPartitions      = "offsets-partitions"
	flagGroupInitialDelay      = "group-initial-rebalance-delay"
	flagGroupMaxMemberBytes    = "group-max-member-bytes"
	flagGroupConsumerSession   = "group-consumer-session-timeout"
	flagDSReplicationFactor    = "ds-replication-factor"
	flagDSMaxBody              = "ds-max-body"
	flagDSReadChunk            = "ds-read-chunk"
	flagDSLongPollTimeout      = "ds-long-poll-timeout"
	flagDSSSEReconnect         = "ds-sse-reconnect"
	flagDSMaxLiveReaders       = "ds-max-live-readers"
	flagDSForwardTimeout       = "ds-forward-timeout"

	flagTLSCert        = "tls-cert"
	flagTLSKey         = "tls-key"
	flagTLSCA          = "tls-ca"
	flagTLSClientAuth  = "tls-client-auth"
	flagGossipKeyFile  = "gossip-key-file"
	flagAuthTokensFile = "auth-tokens-file"
	flagSuperusers     = "superusers"
)

// configFlag maps node.Config field names (as node.FieldError reports them)
// to the flag that sets the field.
var configFlag = map[string]string{
	"ID":             flagID,
	"DataDir":        flagDataDir,
	"Listen":         flagListen,
	"Advertise":      flagAdvertise,
	"KafkaListen":    flagKafkaListen,
	"KafkaAdvertise": flagKafkaAdvertise,

	"AutoCreate.Partitions":        flagAutoPartitions,
	"AutoCreate.ReplicationFactor": flagAutoRF,
	"Gossip":                       flagGossip,
	"Join":                         flagJoin,
	"DialSource":                   flagDialSource,
	"HTTP":                         flagHTTP,
	"Controllers":                  flagController,
	"Rack":                         flagRack,

	"MaxBatchBytes":     flagMaxBatchBytes,
	"RequestMemory":     flagRequestMemory,
	"ConnRequestMemory": flagRequestMemoryPerConn,
	"MaxConns":          flagMaxConns,
	"MaxConnsPerAddr":   flagMaxConnsPerIP,
	"IdleTimeout":       flagIdleTimeout,

	"RetentionBytes":       flagRetentionBytes,
	"RetentionMs":          flagRetentionMs,
	"SegmentBytes":         flagSegmentBytes,
	"SegmentMs":            flagSegmentMs,
	"RetentionInterval":    flagRetentionCheckInterval,
	"OffsetsPartitions":    flagOffsetsPartitions,
	"GroupMaxMemberBytes":  flagGroupMaxMemberBytes,
	"GroupConsumerSession": flagGroupConsumerSession,
	"DS.ReplicationFactor": flagDSReplicationFactor,
	"DS.MaxBody":           flagDSMaxBody,
	"DS.ReadChunk":         flagDSReadChunk,
	"DS.LongPoll":          flagDSLongPollTimeout,
	"DS.MaxLiveReaders":    flagDSMaxLiveReaders,
	"DS.SSEReconnect":      flagDSSSEReconnect,
	"DS.ForwardTimeout":    flagDSForwardTimeout,

	"Security.TLSCert":        flagTLSCert,
	"Security.TLSCA":          flagTLSCA,
	"Security.TLSClientAuth":  flagTLSClientAuth,
	"Security.GossipKeyFile":  flagGossipKeyFile,
	"Security.AuthTokensFile": flagAuthTokensFile,
	"Security.Superusers":     flagSuperusers,
}

var logLevels = []string{"trace", "debug", "info", "warn", "error"}

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, a second one kills the process at once.
	context.AfterFunc(ctx, stop)

	err := newApp(stdout, stderr).RunContext(ctx, args)
	return exitcode.Report(stderr, err)
}

// envName returns the environment twin of a flag: GOSTREAM_ + the name in
// upper snake case.
func envName(flag string) string {
	return "GOSTREAM_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func stringFlag(name, usage, value, defaultText string) *cli.StringFlag {
	return &cli.StringFlag{
		Name:        name,
		Usage:       usage,
		Value:       value,
		DefaultText: defaultText,
		EnvVars:     []string{envName(name)},
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:      "gostream-node",
		Usage:     "run one broker of a gostream cluster",
		UsageText: "gostream-node --id N --data-dir PATH [flags]",
		Description: "Every flag has an environment twin: GOSTREAM_ + the flag name in upper\n" +
			"snake case (--data-dir is GOSTREAM_DATA_DIR). A flag beats its variable.\n\n" +
			"Exit status: 0 stopped cleanly (SIGINT or SIGTERM); 1 bad flags;\n" +
			"2 the node could not start or failed.",
		Version:         version,
		HideHelpCommand: true,
		Writer:          stdout,
		ErrWriter:       stderr,
		Flags: []cli.Flag{
			stringFlag(flagID, "broker id `N`, a positive integer (required)", "", ""),
			stringFlag(flagDataDir, "storage root `PATH`, owned by this node alone (required)", "", ""),
			stringFlag(flagListen, "RPC address `HOST:PORT` (clients and peers)", node.DefaultListen, ""),
			stringFlag(flagAdvertise, "RPC address `HOST:PORT` given to others", "", "the --listen address"),
			stringFlag(flagKafkaListen, "Kafka protocol listeners `NAME://HOST:PORT,...` (a bare HOST:PORT is one named default)", "", "off"),
			stringFlag(flagKafkaAdvertise, "the address Kafka clients dial for each listener, `NAME://HOST:PORT,...`; never 0.0.0.0", "", "each listener's own address"),
			&cli.BoolFlag{Name: flagAutoCreate, EnvVars: []string{envName(flagAutoCreate)},
				Usage: "Kafka clients may create a topic by asking for its metadata (as they do before they produce to it)"},
			stringFlag(flagAutoPartitions, "partitions `N` of an auto-created topic", "", "1"),
			stringFlag(flagAutoRF, "replication factor `N` of an auto-created topic (capped at the brokers)", "", "min(3, brokers)"),
			stringFlag(flagGossip, "memberlist address `HOST:PORT` (TCP and UDP)", node.DefaultGossip, ""),
			stringFlag(flagJoin, "gossip seeds `HOST:PORT,...`", "", "none"),
			stringFlag(flagDialSource, "source `IP` of connections to peers (RPC and gossip streams)", "", "chosen by the system"),
			stringFlag(flagHTTP, "`HOST:PORT` for health, metrics and status", node.DefaultHTTP, ""),
			&cli.BoolFlag{Name: flagUI, EnvVars: []string{envName(flagUI)}, Value: true,
				Usage: "serve the web console at /ui/ on the --http address (--ui=false turns it off)"},
			stringFlag(flagController, "the controller `ID@HOST:PORT`; the node with that id runs it",
				"", "this node, a cluster of one"),
			stringFlag(flagRack, "the node's rack `NAME` (a failure domain: a rack, a room, a zone): new topics place each partition's replicas in distinct racks first", "", "none"),
			stringFlag(flagLogLevel, "log `LEVEL`, one of "+strings.Join(logLevels, ", "), "info", ""),
			stringFlag(flagLogFormat, "log `FORMAT`, text or json", "text", ""),
			stringFlag(flagMaxBatchBytes, "the largest batch a partition takes, `BYTES` (suffix KiB, MiB or GiB allowed); the RPC frame limit is this plus 64 KiB. Set the same on every node",
				"", "4MiB"),
			stringFlag(flagRequestMemory, "memory for the RPC requests and responses of all connections, `BYTES`; past it requests are refused with Busy",
				"", "256MiB"),
			stringFlag(flagRequestMemoryPerConn, "memory for the requests and responses of one RPC connection, `BYTES`; past it the node stops reading that connection",
				"", "two frames, 8.125MiB"),
			stringFlag(flagMaxConns, "open connections in all, `N`, on each of the RPC and HTTP listeners", "", "4096"),
			stringFlag(flagMaxConnsPerIP, "open connections from one IP address, `N`, on each listener", "", "1024"),
			stringFlag(flagIdleTimeout, "close an RPC or HTTP keep-alive connection idle this long, `DURATION`; keep it above clients' 1m pool idle timeout", "", "2m"),
			stringFlag(flagRetentionBytes, "default retention.bytes of topics: what a partition keeps, `BYTES`, or -1 for any amount", "", "-1"),
			stringFlag(flagRetentionMs, "default retention.ms of topics: how long a partition keeps records, `MS` milliseconds, or -1 for forever", "", "604800000, 7 days"),
			stringFlag(flagSegmentBytes, "default segment.bytes of topics: the size at which a segment rolls, `BYTES` from 1MiB to 1GiB", "", "128MiB"),
			stringFlag(flagSegmentMs, "default segment.ms of topics: the age at which a segment rolls, `MS` milliseconds, at least 1000", "", "604800000, 7 days"),
			stringFlag(flagRetentionCheckInterval, "how often retention deletes what the topics' configuration no longer keeps, `DURATION`", "", "1m"),
			stringFlag(flagOffsetsPartitions, "partitions of __consumer_offsets, the topic of consumer groups, `N` from 1 to 1000; read by the controller when a group is first used, fixed from then on", "", "16"),
			stringFlag(flagGroupInitialDelay, "how long a Kafka-protocol group's first join phase waits for more members, `DURATION` (0s: none), as Kafka's group.initial.rebalance.delay.ms", "", "3s"),
			stringFlag(flagGroupConsumerSession, "the session timeout of a member of Kafka's new group protocol (ConsumerGroupHeartbeat), `DURATION` from 1s to 5m, as Kafka's group.consumer.session.timeout.ms", "", "45s"),
			stringFlag(flagGroupMaxMemberBytes, "the largest protocol metadata, and assignment, of a Kafka-protocol group member, `BYTES` up to 1MiB", "", "64KiB"),
			stringFlag(flagDSReplicationFactor, "replication factor `N` of new Durable Streams streams (capped at the brokers)", "", "min(3, brokers)"),
			stringFlag(flagDSMaxBody, "the largest Durable Streams request body, `BYTES`; 413 above it. At most --max-batch-bytes less 4KiB", "", "--max-batch-bytes less 64KiB"),
			stringFlag(flagDSReadChunk, "the data of one Durable Streams GET response, `BYTES` (a first message larger is sent whole)", "", "1MiB"),
			stringFlag(flagDSLongPollTimeout, "how long a Durable Streams long-poll or SSE wait lasts before it answers that nothing came, `DURATION`", "", "20s"),
			stringFlag(flagDSSSEReconnect, "how long a Durable Streams SSE connection lives before the node closes it for the client to resume, `DURATION`", "", "1m"),
			stringFlag(flagDSMaxLiveReaders, "Durable Streams long-polls and SSE connections open at once on this node, `N`; 503 above", "", "1000"),
			stringFlag(flagDSForwardTimeout, "how long a node waits for a stream's leader to answer a forwarded Durable Streams request (besides its long-poll wait), `DURATION`; then 503", "", "10s"),
			stringFlag(flagTLSCert, "this node's certificate `FILE` (PEM): TLS on the RPC and HTTP listeners and on the connections it dials; reloaded on SIGHUP", "", "off"),
			stringFlag(flagTLSKey, "the key `FILE` (PEM) of --tls-cert", "", "off"),
			stringFlag(flagTLSCA, "the cluster's CA certificate `FILE` (PEM): peers and client certificates are verified against it, and nodes present their certificates to each other (mutual TLS)", "", "off"),
			stringFlag(flagTLSClientAuth, "what clients must show, `MODE`: none (only without --tls-ca), request (a certificate is optional and authenticates its holder) or require", "", "none; request with --tls-ca"),
			stringFlag(flagGossipKeyFile, "gossip encryption keys `FILE`: base64 keys of 16, 24 or 32 bytes, one per line, the first sends (head -c 32 /dev/urandom | base64); reloaded on SIGHUP", "", "off"),
			stringFlag(flagAuthTokensFile, "bearer tokens `FILE`: lines PRINCIPAL sha256:HEX (gostream-ctl token create); turns authentication and authorization on; needs --tls-ca; reloaded on SIGHUP", "", "off"),
			stringFlag(flagSuperusers, "principals `NAME,...` allowed everything once authorization is on; list every node's certificate name", "", "none"),
		},
		Action:         runNodeAction,
		OnUsageError:   onUsageError,
		ExitErrHandler: func(*cli.Context, error) {}, // run reports errors and picks the exit status
	}
}

// onUsageError names the errors urfave/cli finds while parsing flags.
func onUsageError(_ *cli.Context, err error, _ bool) error {
	return exitcode.FlagError(err, "gostream-node")
}

func runNodeAction(c *cli.Context) error {
	if c.Args().Present() {
		return exitcode.Usagef("UnexpectedArgument", "%q: gostream-node takes flags only (see gostream-node --help)", c.Args().First())
	}
	cfg, err := configFromFlags(c)
	if err != nil {
		return err
	}
	logger, err := loggerFromFlags(c)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	// SIGHUP reloads the TLS, tokens and gossip key files.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reload := make(chan struct{}, 1)
	cfg.Security.Reload = reload
	go func() {
		for {
			select {
			case <-hup:
				select {
				case reload <- struct{}{}:
				default: // one is pending already
				}
			case <-c.Context.Done():
				return
			}
		}
	}()
	if err := node.Run(c.Context, cfg); err != nil {
		return nameRunError(err)
	}
	return nil
}

// configFromFlags builds and validates the node's Config. Every error it
// returns is a usage error naming the flag at fault.
func configFromFlags(c *cli.Context) (node.Config, error) {
	for _, name := range []string{flagID, flagDataDir} {
		if strings.TrimSpace(c.String(name)) == "" {
			return node.Config{}, exitcode.Usagef("MissingFlag", "--%s is required (or set %s)", name, envName(name))
		}
	}
	idText := strings.TrimSpace(c.String(flagID))
	id, err := strconv.ParseInt(idText, 10, 32)
	if err != nil || id <= 0 {
		return node.Config{}, invalidFlag(flagID, idText, "want a positive integer")
	}
	cfg := node.Config{
		ID:             int32(id),
		DataDir:        c.String(flagDataDir),
		Listen:         strings.TrimSpace(c.String(flagListen)),
		Advertise:      strings.TrimSpace(c.String(flagAdvertise)),
		KafkaListen:    strings.TrimSpace(c.String(flagKafkaListen)),
		KafkaAdvertise: strings.TrimSpace(c.String(flagKafkaAdvertise)),
		AutoCreate:     node.AutoCreateConfig{Enabled: c.Bool(flagAutoCreate)},
		Gossip:         strings.TrimSpace(c.String(flagGossip)),
		HTTP:           strings.TrimSpace(c.String(flagHTTP)),
		DialSource:     strings.TrimSpace(c.String(flagDialSource)),
		Rack:           strings.TrimSpace(c.String(flagRack)),
		Version:        version,
		UIDisabled:     !c.Bool(flagUI),
	}
	if cfg.Join, err = splitList(c.String(flagJoin)); err != nil {
		return node.Config{}, invalidFlag(flagJoin, c.String(flagJoin), err.Error())
	}
	if cfg.Controllers, err = node.ParseControllers(c.String(flagController)); err != nil {
		return node.Config{}, configError(err)
	}
	if err := limitsFromFlags(c, &cfg); err != nil {
		return node.Config{}, err
	}
	if err := securityFromFlags(c, &cfg); err != nil {
		return node.Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return node.Config{}, configError(err)
	}
	return cfg, nil
}

// securityFromFlags reads the TLS, gossip encryption and authentication
// flags into cfg; Config.Validate checks how they go together.
func securityFromFlags(c *cli.Context, cfg *node.Config) error {
	s := &cfg.Security
	s.TLSCert = strings.TrimSpace(c.String(flagTLSCert))
	s.TLSKey = strings.TrimSpace(c.String(flagTLSKey))
	s.TLSCA = strings.TrimSpace(c.String(flagTLSCA))
	s.GossipKeyFile = strings.TrimSpace(c.String(flagGossipKeyFile))
	s.AuthTokensFile = strings.TrimSpace(c.String(flagAuthTokensFile))
	if text := strings.TrimSpace(c.String(flagTLSClientAuth)); text != "" {
		a, err := security.ParseClientAuth(text)
		if err != nil {
			return invalidFlag(flagTLSClientAuth, text, err.Error())
		}
		s.TLSClientAuth = a
	}
	users, err := security.ParseSuperusers(c.String(flagSuperusers))
	if err != nil {
		return invalidFlag(flagSuperusers, c.String(flagSuperusers), err.Error())
	}
	s.Superusers = users
	return nil
}

// limitsFromFlags reads the limit flags that are set into cfg; unset ones
// stay zero, which takes the node's defaults.
func limitsFromFlags(c *cli.Context, cfg *node.Config) error {
	for _, f := range []struct {
		name string
		set  func(int64)
	}{
		{flagMaxBatchBytes, func(n int64) { cfg.MaxBatchBytes = int(n) }},
		{flagRequestMemory, func(n int64) { cfg.RequestMemory = n }},
		{flagRequestMemoryPerConn, func(n int64) { cfg.ConnRequestMemory = n }},
		{flagDSMaxBody, func(n int64) { cfg.DS.MaxBody = int(n) }},
		{flagGroupMaxMemberBytes, func(n int64) { cfg.GroupMaxMemberBytes = int(n) }},
		{flagDSReadChunk, func(n int64) { cfg.DS.ReadChunk = int(n) }},
	} {
		if text := strings.TrimSpace(c.String(f.name)); text != "" {
			n, ok := parseBytes(text)
			if !ok {
				return invalidFlag(f.name, text, "want a positive number of bytes, such as 4194304 or 4MiB")
			}
			f.set(n)
		}
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{flagMaxConns, &cfg.MaxConns}, {flagMaxConnsPerIP, &cfg.MaxConnsPerAddr}, {flagOffsetsPartitions, &cfg.OffsetsPartitions},
		{flagDSReplicationFactor, &cfg.DS.ReplicationFactor}, {flagDSMaxLiveReaders, &cfg.DS.MaxLiveReaders},
		{flagAutoPartitions, &cfg.AutoCreate.Partitions}, {flagAutoRF, &cfg.AutoCreate.ReplicationFactor}} {
		if text := strings.TrimSpace(c.String(f.name)); text != "" {
			n, err := strconv.Atoi(text)
			if err != nil || n <= 0 {
				return invalidFlag(f.name, text, "want a positive integer")
			}
			*f.dst = n
		}
	}
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{flagIdleTimeout, &cfg.IdleTimeout}, {flagRetentionCheckInterval, &cfg.RetentionInterval},
		{flagDSLongPollTimeout, &cfg.DS.LongPoll}, {flagDSSSEReconnect, &cfg.DS.SSEReconnect}, {flagDSForwardTimeout, &cfg.DS.ForwardTimeout}} {
		if text := strings.TrimSpace(c.String(f.name)); text != "" {
			d, err := time.ParseDuration(text)
			if err != nil || d <= 0 {
				return invalidFlag(f.name, text, "want a positive duration, such as 2m or 90s")
			}
			*f.dst = d
		}
	}
	if text := strings.TrimSpace(c.String(flagGroupConsumerSession)); text != "" {
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			return invalidFlag(flagGroupConsumerSession, text, "want a duration from 1s to 5m, such as 45s")
		}
		cfg.GroupConsumerSession = d
	}
	if text := strings.TrimSpace(c.String(flagGroupInitialDelay)); text != "" {
		d, err := time.ParseDuration(text)
		if err != nil || d < 0 {
			return invalidFlag(flagGroupInitialDelay, text, "want a duration, such as 3s, or 0s for none")
		}
		cfg.GroupInitialDelay = d
		if d == 0 {
			cfg.GroupInitialDelay = -1
		}
	}
	return topicDefaultsFromFlags(c, cfg)
}

// topicDefaultsFromFlags reads the node's defaults for the topic
// configuration. A size takes -1 (unlimited, for --retention-bytes) or
// BYTES; a time -1 (forever, for --retention-ms) or a number of
// milliseconds, as the topic keys do. The ranges are checked by
// Config.Validate.
func topicDefaultsFromFlags(c *cli.Context, cfg *node.Config) error {
	for _, f := range []struct {
		name  string
		bytes bool
		dst   *int64
	}{
		{flagRetentionBytes, true, &cfg.RetentionBytes},
		{flagRetentionMs, false, &cfg.RetentionMs},
		{flagSegmentBytes, true, &cfg.SegmentBytes},
		{flagSegmentMs, false, &cfg.SegmentMs},
	} {
		text := strings.TrimSpace(c.String(f.name))
		if text == "" {
			continue
		}
		n, err := strconv.ParseInt(text, 10, 64)
		ok := err == nil && n != 0
		if !ok && f.bytes {
			n, ok = parseBytes(text)
		}
		if !ok {
			want := "want a positive number of milliseconds, or -1"
			if f.bytes {
				want = "want a positive number of bytes, such as 1073741824 or 1GiB, or -1"
			}
			return invalidFlag(f.name, text, want)
		}
		*f.dst = n
	}
	return nil
}

// parseBytes reads a positive number of bytes, with an optional binary
// suffix: 4194304, 4096KiB, 4MiB, 1GiB.
func parseBytes(s string) (int64, bool) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, false
	}
	return n * mult, true
}

// splitList splits a comma-separated list, trimming spaces. An empty string
// is an empty list; an empty entry is an error.
func splitList(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			return nil, errors.New("want HOST:PORT,... without empty entries")
		}
		out = append(out, e)
	}
	return out, nil
}

func invalidFlag(flag, value, reason string) error {
	return exitcode.Usagef("InvalidFlag", "--%s %q: %s", flag, value, reason)
}

// configError turns a node.FieldError into a usage error naming the flag.
func configError(err error) error {
	var fe *node.FieldError
	if errors.As(err, &fe) {
		if flag, ok := configFlag[fe.Field]; ok {
			return invalidFlag(flag, fe.Value, fe.Reason)
		}
	}
	return exitcode.Usagef("InvalidFlag", "%v", err)
}

// loggerFromFlags creates the process's one root logger, writing to stderr.
func loggerFromFlags(c *cli.Context) (hclog.Logger, error) {
	levelText := strings.ToLower(strings.TrimSpace(c.String(flagLogLevel)))
	level := hclog.NoLevel
	for _, l := range logLevels {
		if levelText == l {
			level = hclog.LevelFromString(l)
		}
	}
	if level == hclog.NoLevel {
		return nil, invalidFlag(flagLogLevel, c.String(flagLogLevel), "want one of "+strings.Join(logLevels, ", "))
	}
	var jsonFormat bool
	switch strings.ToLower(strings.TrimSpace(c.String(flagLogFormat))) {
	case "text":
	case "json":
		jsonFormat = true
	default:
		return nil, invalidFlag(flagLogFormat, c.String(flagLogFormat), "want text or json")
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       "gostream-node",
		Level:      level,
		JSONFormat: jsonFormat,
		Output:     c.App.ErrWriter,
	}), nil
}

// nameRunError gives an error from node.Run the name it is reported under.
// All of them are failures (exit status 2): the flags were fine.
func nameRunError(err error) error {
	switch {
	case errors.Is(err, storage.ErrStampMismatch):
		return exitcode.Fail("StampMismatch", err)
	case errors.Is(err, storage.ErrRootInUse):
		return exitcode.Fail("RootInUse", err)
	case errors.Is(err, transport.ErrDuplicateBroker):
		return exitcode.Fail("DuplicateBroker", err)
	case errors.Is(err, storage.ErrCorrupt), errors.Is(err, metadata.ErrCorrupt), errors.Is(err, quorum.ErrCorrupt):
		return exitcode.Fail("Corrupt", err)
	case errors.Is(err, node.ErrSecurityFiles):
		return exitcode.Fail("SecurityFiles", err)
	case errors.Is(err, node.ErrCannotListen):
		return exitcode.Fail("CannotListen", err)
	case errors.Is(err, node.ErrInvalidConfig):
		return configError(err)
	}
	return exitcode.Fail("NodeFailed", err)
}
