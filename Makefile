# gostream: `make run` starts a local cluster, `make test` checks everything.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

GO       ?= go
BIN      ?= bin
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
# Each package's tests, race detector included, must finish within this
# (go test -timeout holds per package): testcluster, the longest, took
# 725 to over 900 s on two shared cores, as busy as the host was.
TEST_TIMEOUT ?= 20m
# Each fuzz target's time: short in `make test`, longer in `make fuzz`.
TEST_FUZZTIME ?= 2s
FUZZTIME      ?= 60s
# Benchmark repetitions and the time of each, when set; otherwise each
# benchmark target has its own (`make bench`: 5 of 1s; `make bench-micro`:
# 6 of 200ms). Compare two runs with benchstat.
BENCHCOUNT ?=
BENCHTIME  ?=

.PHONY: all build test fuzz kafka-clients run node kill reload demo bench fmt lint clean chaos chaos-groups chaos-moves conformance console-test

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/gostream-node ./cmd/node
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/gostream-ctl ./cmd/ctl

# In order: vet, all tests under the race detector, a short pass of every
# fuzz target. The chaos smoke (TestChaosSmoke) needs root, unshare, ip and
# iptables; where it cannot run it skips, and since go test shows a skip only
# with -v, it writes why to a file that the line after the tests prints.
# kafkajs (testcluster/kafkajs, pinned by its lock file) is installed first
# where npm is; without it its test skips.
test:
	@if [ ! -e testcluster/kafkajs/node_modules/kafkajs/package.json ] && command -v npm >/dev/null 2>&1; then \
		echo "npm ci --prefix testcluster/kafkajs"; npm ci --prefix testcluster/kafkajs --no-audit --no-fund; fi
	$(GO) vet ./...
	@report=$$(mktemp); \
	echo "$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./..."; \
	GOSTREAM_CHAOS_SMOKE_SKIP_REPORT=$$report $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...; status=$$?; \
	if [ -s "$$report" ]; then \
		echo "chaos smoke: skipped: $$(cat "$$report"); run make test as root with unshare, ip and iptables installed to include it"; \
	fi; \
	rm -f "$$report"; exit $$status
	FUZZTIME=$(TEST_FUZZTIME) GO=$(GO) scripts/fuzz.sh

fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

# The Kafka client matrix (testcluster TestKafkaClientMatrix): franz-go,
# sarama (default protocol version and 3.6), kafkajs and kcat each write
# 100,000 keyed records with headers, compared record by record with
# gostream-ctl consume and read back through a leader's and a follower's
# node. A few minutes; .ci/run runs it.
kafka-clients:
	@if [ ! -e testcluster/kafkajs/node_modules/kafkajs/package.json ] && command -v npm >/dev/null 2>&1; then \
		echo "npm ci --prefix testcluster/kafkajs"; npm ci --prefix testcluster/kafkajs --no-audit --no-fund; fi
	GOSTREAM_KAFKA_MATRIX=1 $(GO) test -count=1 -timeout 30m -run TestKafkaClientMatrix -v ./testcluster

# The Durable Streams conformance suite (pinned in conformance/, installed
# with npm ci) against a three-node cluster it starts on ports 9600-9622:
# once through node 1 and once through node 2 (each leads a third of the
# streams and forwards the rest), then the official client through node 2.
conformance: build
	BIN=$(BIN) scripts/conformance.sh

# The web console in a real browser (docs/console.md): Debian's headless
# Chromium, driven by playwright-core (console/e2e, npm ci if needed),
# against a three-node cluster with security off, seeded with topics,
# records, groups and a stream, then one with TLS and tokens; takes a
# screenshot of every screen (SCREENSHOTS=docs/console refreshes those the
# documentation shows). Needs chromium and kcat (.ci/run installs them).
# A minute or two.
console-test:
	BIN=$(BIN) scripts/console-e2e.sh

# Three nodes on loopback with the ports of docs/cli.md (node 1 the controller),
# data in ./data/node{1,2,3}, in the foreground; Ctrl-C stops them (and a node
# `make node` started again). SECURE=1 runs them with TLS, mutual TLS, gossip
# encryption and an admin token. PORT_BASE=19400 moves node N to PORT_BASE +
# 10(N-1) (RPC), +1 (gossip), +2 (HTTP), with its data in ./data-19400, beside
# a cluster on other ports; give the same PORT_BASE to node, kill and reload.
# AUTOPILOT=1 starts a gostream-ctl autopilot beside them (docs/autopilot.md),
# with the flags in AUTOPILOT_ARGS (AUTOPILOT_ARGS="--failover-after 15s").
AUTOPILOT ?=
AUTOPILOT_ARGS ?=
run: build
	BIN=$(BIN) SECURE=$(SECURE) PORT_BASE=$(PORT_BASE) AUTOPILOT=$(AUTOPILOT) AUTOPILOT_ARGS="$(AUTOPILOT_ARGS)" scripts/run-cluster.sh

# One node of `make run` by itself, in the foreground, with the flags and
# data `make run` gave it (N=1, 2 or 3): to start again a node that died
# while the others run on. Then `gostream-ctl cluster status` says what is
# left to do.
N ?=
# SECURE=1: the same cluster with TLS, mutual TLS, gossip encryption and an
# admin token (docs/security.md); the files go to ./data/secure (with
# PORT_BASE=19400, ./data-19400/secure).
SECURE ?=
# The port base of the cluster (scripts/local-cluster.sh); empty is 9400.
PORT_BASE ?=
node: build
	BIN=$(BIN) SECURE=$(SECURE) PORT_BASE=$(PORT_BASE) scripts/run-node.sh $(N)

# kill -9 of node N of `make run` (the failure drill of the README), found by
# the PID file its script wrote (./data/nodeN.pid), never by name: the nodes
# of other clusters on the machine are left alone.
kill:
	PORT_BASE=$(PORT_BASE) scripts/signal-node.sh KILL $(N)

# SIGHUP to each node of `make run` that runs, found as kill finds it: the
# nodes read their certificates, tokens and gossip keys again.
reload:
	PORT_BASE=$(PORT_BASE) scripts/signal-node.sh HUP

# A one-minute tour: one node on a temporary directory, a topic, keyed
# events produced and consumed, a partition replayed; then everything is
# stopped and removed.
demo: build
	BIN=$(BIN) scripts/demo.sh

# Storage benchmarks. To compare two versions, save each run's output and
#   benchstat old.txt new.txt   (go install golang.org/x/perf/cmd/benchstat@latest)
bench:
	@mkdir -p $(BIN)
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(or $(BENCHTIME),1s) -count=$(or $(BENCHCOUNT),5) ./storage/ | tee $(BIN)/bench.txt
	@echo "bench: results in $(BIN)/bench.txt; compare two runs with: benchstat old.txt new.txt"

# The hot functions of a record's way through a node, each benchmarked on
# its own in its package, with batches of 1, 16 and 256 records of 1 KiB
# (docs/benchmarks.md, "Hot functions on their own"): a produce request's
# whole life on a server connection, a response; the client's (and a
# leader's) send; the batch format's check, stamp, encoding and decoding;
# the log's Write, WriteExact and Read, with and without fsync; a
# follower's Replicate; the leader's Produce (RF 1); a Kafka Produce's and
# Fetch's whole life on a Kafka connection. BENCHCOUNT runs of BENCHTIME
# each (default 6 of 200ms, about two and a half minutes) into
# $(BIN)/bench-micro.txt, summed up by benchstat (installed into
# $(go env GOPATH)/bin if it is missing); BEFORE=file, the same target's
# output from another build, prints the two side by side.
# BENCH_MICRO_PKGS=./storage runs one package's. A new hot-function
# benchmark is added to BENCH_MICRO by name.
BENCH_MICRO_PKGS := ./transport ./record ./storage ./replication ./broker ./kafkaapi
BENCH_MICRO := ^Benchmark(ServerRequest|ServerRespond|ClientSendNotify|ClientCallFetch|ValidateBatch|StampBatch|EncodeBatch|AppendKafka|DecodeBatch|LogWrite|LogWriteExact|LogRead|Replicate|Produce|ProduceRequest|FetchRequest)$$
BEFORE ?=
.PHONY: bench-micro
bench-micro:
	@mkdir -p $(BIN)
	@if [ -n "$(BEFORE)" ] && [ ! -r "$(BEFORE)" ]; then echo "bench-micro: BEFORE=$(BEFORE): no such file; give the bench-micro.txt of the build to compare with"; exit 2; fi
	@echo "bench-micro: load average $$(cut -d' ' -f1-3 /proc/loadavg); the logs of fs=os on $$(stat -f -c %T "$${TMPDIR:-/tmp}") (a tmpfs makes their fsync free)"
	$(GO) test -run='^$$' -bench='$(BENCH_MICRO)' -benchmem -benchtime=$(or $(BENCHTIME),200ms) -count=$(or $(BENCHCOUNT),6) $(BENCH_MICRO_PKGS) | tee $(BIN)/bench-micro.txt
	@echo "bench-micro: load average $$(cut -d' ' -f1-3 /proc/loadavg)"
	@gobin="$$($(GO) env GOPATH)/bin"; benchstat=$$(command -v benchstat || echo "$$gobin/benchstat"); \
	if [ ! -x "$$benchstat" ]; then \
		echo "GOBIN=$$gobin $(GO) install golang.org/x/perf/cmd/benchstat@latest"; \
		GOBIN="$$gobin" $(GO) install golang.org/x/perf/cmd/benchstat@latest || \
			{ echo "bench-micro: benchstat could not be installed; the results are in $(BIN)/bench-micro.txt"; exit 1; }; \
	fi; \
	"$$benchstat" $(BEFORE) $(BIN)/bench-micro.txt && \
	echo "bench-micro: results in $(BIN)/bench-micro.txt; against another build's: make bench-micro BEFORE=its-bench-micro.txt"

# gostream beside NATS JetStream in one run on this machine: one node, then
# three nodes, every measurement interleaved three times, medians and ratios
# against the targets (exit 1 if one is missed); on the three nodes also
# franz-go through the Kafka listeners beside gostream-ctl bench (B4, B5,
# scripts/kafkabench), and Kafka consumer groups beside ours: a franz-go
# group of three reading six partitions (B6), 16 franz-go committers (B7),
# and kill -9 of a kcat, franz-go or native member to its partitions read
# by another (B8; kcat from PATH or KCAT=). ONLY="B6 B7 B8" NATS=0 runs the
# group rows alone. Each figure is printed with the min-max of its runs,
# the CPU per record of servers and client apart, and the load average.
# BEFORE=DIR (another build's gostream-node and gostream-ctl) or
# BEFORE_REV=REV (built from git) measures that build alternately with this
# one and adds a table after vs before. Installs the NATS binaries
# into $(BIN)/peers if they are missing. See docs/benchmarks.md.
.PHONY: bench-compare
bench-compare: build
	BIN=$(BIN) GO=$(GO) scripts/bench-compare.sh

# gostream's Durable Streams beside the reference server
# (@durable-streams/server 0.3.7, file-backed; conformance/, npm ci if
# needed) in one run on this machine: three nodes, RF 3, on ports
# 9700-9722 and the reference on 9790; 16 clients appending 1 KiB bodies
# through a follower, and append-to-SSE latency, interleaved three times;
# medians, ratios, targets (exit 1 if one is missed). RUNS, CLIENTS,
# DURATION, SSE_COUNT, VIA, KEEP=1: see scripts/bench-ds.sh and
# docs/benchmarks.md.
.PHONY: bench-ds
bench-ds: build
	$(GO) build -o $(BIN)/dsbench ./scripts/dsbench
	BIN=$(BIN) scripts/bench-ds.sh

# The cost of security: a plaintext three-node cluster beside one with TLS,
# mutual TLS, gossip encryption and a token, the same produce measurements
# interleaved (B1 pipelined, B3 16 synchronous producers, one synchronous
# producer's p50); targets TLS/plaintext B1 >= 0.8, B3 >= 0.9, p50 <= 1.2
# (docs/benchmarks.md). RUNS, RECORDS: see scripts/bench-tls.sh.
.PHONY: bench-tls
bench-tls: build
	BIN=$(BIN) scripts/bench-tls.sh

# Operator failover and recovery of a whole broker at 2,000 partitions, RF 3,
# on fresh three-node clusters, against one plain metadata change of the same
# run; targets: failover under 1 s, recovery under 5 s (docs/benchmarks.md).
# PARTITIONS and RUNS change the size and the repetitions.
.PHONY: bench-failover
bench-failover:
	GO=$(GO) scripts/bench-failover.sh

# Moving a partition: SIZE_GB (5) GiB of one partition moved to another
# broker at THROTTLE_MB (50) MB/s while a producer writes to a topic of
# three partitions, RF 3, beside the producer's rate just before; targets:
# the move within 20 % of SIZE / THROTTLE, the producer at 0.8 of its rate
# or more (docs/benchmarks.md). RUNS, ALONE=1 (a move with no producer
# too), KEEP=1: see scripts/bench-move.sh. Needs about 2.2 x SIZE_GB of disk.
.PHONY: bench-move
bench-move:
	GO=$(GO) scripts/bench-move.sh

# The web console at scale: three nodes, 2,000 partitions (20 topics of
# 100, RF 3) and 200 groups with committed offsets; node 1's console's
# lists, overview and a topic's page timed (min, median, max of 20), and
# the survey's rounds; the topics, groups, topic and overview screens
# loaded in headless Chromium when it is there (10 each, navigation to the
# table's rows shown) and sort clicks on the topics list; then a live
# tail of 5,000 records/s: the node's memory with a reader that takes
# everything and one that stops reading, and how soon that one is
# dropped. Targets: the topics list under 0.2 s, the topics page under
# 0.5 s, the tails' memory within docs/console.md's bound, the stalled
# reader dropped within 30 s (docs/benchmarks.md). PARTITIONS, TOPICS,
# CONSUMER_GROUPS, BROWSER=0, TAIL=0, TAIL_RATE, TAIL_READERS, KEEP=1...:
# see scripts/bench-console.sh.
.PHONY: bench-console
bench-console:
	GO=$(GO) scripts/bench-console.sh

# Consumer groups beside their baselines on one three-node cluster, RF 3,
# 1 KiB records, three interleaved rounds: 16 synchronous committers beside
# 16 synchronous producers (B3), and a group of three members beside six
# plain consumers of the same six partitions (docs/benchmarks.md).
.PHONY: bench-groups
bench-groups:
	GOSTREAM_BENCH_GROUPS=1 $(GO) test -count=1 -timeout 20m -run 'TestBenchGroups$$' -v ./testcluster/ | grep -E 'groups_bench_test|^(ok|FAIL|---)'

# The chaos harness (testcluster/, docs/design.md section 10): every scenario
# on its own cluster (3 nodes, 4 for the raft-controller ones, 5 and 7 for
# the moves'), CHAOS_DURATION of faults each (twenty-four scenarios: about
# 29 minutes in all), then the
# checkers. `make test` runs only a short
# smoke of it. Network faults need root (a network namespace and iptables
# inside it). A run that finds a violation is saved in
# testcluster/runs/<scenario>-<seed>/ with the command that replays it;
# exit 1 on any violation.
CHAOS_DURATION  ?= 60s
CHAOS_SEED      ?= 0
CHAOS_RUNS      ?= 1
CHAOS_SCENARIOS ?= leader-kill,follower-kill,leader-pause,leader-isolated,controller-isolated,controller-mid-failover,lost-unsynced,slow-network,rolling-restart,duplicate-id,bit-rot,disk-full,topic-recreate,restart-one-down,power-loss,unreplicated-tail,group-members,random,raft-controller-kill,raft-controller-isolated,raft-controller-mid-failover,reassign,reassign-7,autopilot
chaos:
	$(GO) run ./testcluster/cmd/chaos --duration $(CHAOS_DURATION) --seed $(CHAOS_SEED) --runs $(CHAOS_RUNS) --scenarios $(CHAOS_SCENARIOS)

# The chaos scenarios of consumer groups, native and Kafka's (franz-go
# members, one static): group-members and random, CHAOS_DURATION each
# (about 3 minutes in all); .ci/run runs it.
chaos-groups:
	$(MAKE) chaos CHAOS_SCENARIOS=group-members,random

# The latency of a producer while replicas move (docs/reassignment.md):
# four real nodes built without the race detector, a producer's p99
# during cluster rebalance and broker decommission against its p99 before
# (target: at most twice), printed; about a minute.
.PHONY: test-latency
test-latency:
	$(GO) test -count=1 -run 'TestGrowToAFourthBrokerAndDecommissionOne' -v ./testcluster/

# The chaos scenarios of moving replicas (docs/reassignment.md): reassign
# (5 nodes, 3 controller candidates) and reassign-7 (7 nodes, 5), each on
# two seeds, 40 s of faults (about 9 minutes in all); .ci/run runs it.
chaos-moves:
	$(MAKE) chaos CHAOS_SCENARIOS=reassign,reassign-7 CHAOS_RUNS=2 CHAOS_DURATION=40s

# The chaos scenario where a gostream-ctl autopilot is the only operator
# (docs/autopilot.md): nodes killed, paused and stopped one at a time, no
# command run by the harness; CHAOS_DURATION of faults (about 2 minutes in
# all); .ci/run runs it.
.PHONY: chaos-autopilot
chaos-autopilot:
	$(MAKE) chaos CHAOS_SCENARIOS=autopilot

# Plants each bug of testcluster/plants/ in a copy of the tree (storage that
# skips fsync, a follower that acknowledges before its fsync, a
# high-watermark checkpoint that holds the log end) and runs the scenarios
# each patch names (power-loss, unreplicated-tail) on two seeds against it:
# every bug must be caught, and the unplanted copy must pass them all.
# About 20 minutes. See docs/chaos.md.
.PHONY: plant-bugs
plant-bugs:
	GO=$(GO) scripts/plant-bug.sh

fmt:
	gofmt -w .

lint:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then \
		echo "lint: these files need gofmt (run 'make fmt'):"; echo "$$unformatted"; exit 1; \
	fi
	@if command -v staticcheck >/dev/null 2>&1; then staticcheck ./...; \
	else echo "lint: staticcheck not installed, skipped"; fi

# Removes build output only; ./data (the nodes' storage) is kept.
clean:
	rm -rf $(BIN)
