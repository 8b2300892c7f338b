# SkyGo build, test and benchmark targets.
GO      ?= go
BIN     := bin/sky
LDFLAGS := -s -w -X github.com/skygo/skygo/internal/version.Commit=$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

.PHONY: build runtime bench-cli bench-slim bench-queued bench-idle test unit unit-fast pytest vet staticcheck bench bench-managed bench-node bench-serve bench-sdk bench-storm fuzz clean catalog-snapshot openapi

# build: bin/sky, the CLI a user runs, carrying the RUNTIME (internal/bundle):
# the API server (sky-server), the SkyServe load balancer for this machine
# (sky-lb) and the node runtime for each architecture a node may have
# (sky-node-linux-<arch>: the API server copies the one for a node's
# `uname -m` to it, and runs the host's for the local infrastructure).
# Each is built into bin/, gzipped into internal/bundle/files with a
# MANIFEST of its size, SHA-256 and Go build ID, and embedded into
# bin/sky (88.6 MB uncompressed, 40 MB so). bin/sky uses the copies beside
# it while they are the same build, else extracts its own once.
BUNDLE     := internal/bundle/files
NODE_ARCHS := amd64 arm64
NODE_BINS  := $(foreach a,$(NODE_ARCHS),bin/sky-node-linux-$(a))
RUNTIME    := sky-server sky-lb $(foreach a,$(NODE_ARCHS),sky-node-linux-$(a))

build: runtime
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sky

runtime: $(NODE_BINS) bin/sky-lb bin/sky-server
	find $(BUNDLE) -mindepth 1 ! -name README.md -delete
	for f in $(RUNTIME); do gzip -6 -n -c bin/$$f > $(BUNDLE)/$$f.gz || exit 1; \
		echo "$$f $$(stat -c %s bin/$$f) $$(sha256sum < bin/$$f | cut -d' ' -f1) $$($(GO) tool buildid bin/$$f)"; \
	done > $(BUNDLE)/MANIFEST.tmp && mv $(BUNDLE)/MANIFEST.tmp $(BUNDLE)/MANIFEST

# Always rebuilt (go's cache makes that cheap), like bin/sky.
.PHONY: bin/sky-server bin/sky-lb $(NODE_BINS)
bin/sky-server:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/sky-server

bin/sky-lb:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/sky-lb

$(NODE_BINS): bin/sky-node-linux-%:
	CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/sky-node

# test: what CI runs. vet, staticcheck, every Go test with the race
# detector, then the Python SDK's tests with Debian's interpreter (its
# pytest and PyYAML come from apt: .ci/run).
test: vet staticcheck unit pytest

vet:
	$(GO) vet ./...

# openapi: regenerate docs/openapi.json, the API description built from
# the server's operation descriptors and their Go types, and the Python
# SDK's operation table made from it (cmd/openapigen; its tests fail while
# a committed file is stale).
openapi:
	$(GO) run ./cmd/openapigen -o docs/openapi.json -py python/sky/client/_ops.py

staticcheck:
	$(GO) tool staticcheck ./...

# The SkyPilot corpus compatibility suite needs ../shared (or SKYGO_SHARED);
# go test prints nothing for a passing package, so the skip is said here.
SHARED ?= $(if $(SKYGO_SHARED),$(SKYGO_SHARED),$(abspath $(CURDIR)/../shared))

unit: build
	@[ -d "$(SHARED)/corpus" ] || echo "SkyPilot corpus compatibility suite skipped: ../shared/corpus not found (set SKYGO_SHARED to a folder holding corpus/ and catalog/)"
	SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 25m ./...

# unit-fast: the unit lane, for the edit-and-test loop (make test stays
# what CI runs): every Go test with -race but the end-to-end suite
# (internal/e2e) and the suites of the real-infrastructure harnesses under
# internal/testutil (sshd hosts, Slurm, Kubernetes, EC2 and moto). -short
# skips the slow checks that run the built binary or the toolchain (the
# CLI's flag walk, the 8-combination build-tag matrix), and SKYGO_SKIP_SSH,
# _SLURM and _K8S skip the tests in other packages that start those servers.
# PostgreSQL (the store suite) and moto (AWS and S3 unit tests) stay: each
# starts in seconds.
UNIT_FAST_EXCLUDE := /internal/e2e$$|/internal/testutil/(ec2hosts|k8stest|mototest|slurmtest|sshhosts)$$
unit-fast: build
	SKYGO_SKIP_SSH=1 SKYGO_SKIP_SLURM=1 SKYGO_SKIP_K8S=1 SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) \
		$(GO) test -race -short -count=1 -timeout 10m $$($(GO) list ./... | grep -Ev '$(UNIT_FAST_EXCLUDE)')

# pytest: the Python SDK's tests (python/tests) against bin/sky, with the
# interpreter CI has (PYTHON overrides it).
PYTHON ?= /usr/bin/python3
pytest: build
	SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q -rs python/tests

# bench: benchmarks that print ratios against a baseline measured in the same run.
bench: build
	SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench . -benchtime 5x -count 1 ./...

# bench-cli: what sky costs before it does anything (issue 27): `sky --help`
# and `sky status` against a warm local server, each beside `true` in the
# same run: median CPU, peak RSS and wall time of SKYGO_BENCH_CLI_RUNS runs
# (default 21), the sum of package inits, and the ratios to `true`.
bench-cli: build
	SKYGO_BENCH_CLI=1 SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench 'CLIStart' -benchtime 1x -count 1 -v ./cmd/sky

# bench-managed: the managed-jobs scale benchmarks (1,000 concurrent jobs,
# 10,000 queued; minutes each), run once; SKYGO_BENCH_MANAGED_JOBS,
# _SLEEP and _QUEUED change the sizes.
bench-managed: build
	SKYGO_BENCH_MANAGED=1 SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench 'Managed' -benchtime 1x -count 1 -timeout 60m -v ./internal/e2e

# bench-storm: a team server under a storm (issue 26): `sky status` p50/p99
# alone, then while 200 `sky jobs queue` clients loop and 50 managed jobs
# launch and run; a few minutes, run once. SKYGO_BENCH_STORM_CLIENTS,
# _JOBS, _SLEEP, _RUNS and _MAX_SECONDS change the sizes,
# SKYGO_BENCH_STORM_SERVER_ENV="K=V ..." adds environment to the server.
bench-storm: build
	SKYGO_BENCH_STORM=1 SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench 'StatusUnderStorm' -benchtime 1x -count 1 -timeout 60m -v ./internal/e2e

# bench-slim: issue 27's figures in one run, each against its in-run
# baseline: the command line's start-up (bench-cli), the node runtime
# (bench-node), the load balancer (bench-serve), the idle API server
# (bench-idle) and the API server's
# memory with 10,000 queued managed jobs (bench-queued).
bench-slim: bench-cli bench-node bench-serve bench-idle bench-queued

# bench-queued: the API server idle (RSS, heap) and with 10,000 managed
# jobs queued: RSS per job, `sky status` against none queued,
# `sky jobs queue -a -o json` (minutes; SKYGO_BENCH_MANAGED_QUEUED sets
# the number).
bench-queued: build
	SKYGO_BENCH_MANAGED=1 SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench 'ManagedQueued' -benchtime 1x -count 1 -timeout 60m -v ./internal/e2e

# bench-idle: the API server idle (RSS, its anonymous part, heap in use),
# median of 5 starts in fresh HOMEs; IDLE_BASELINE=DIR (a directory holding
# another build's sky-server) alternates the two and prints the ratio.
bench-idle: build
	SKYGO_BENCH_IDLE=1 SKYGO_BENCH_IDLE_BASELINE=$(IDLE_BASELINE) SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench 'ServerIdle' -benchtime 1x -count 1 -timeout 30m -v ./internal/e2e

# bench-node: the node runtime against the server program in the same
# run: sizes per architecture, peak RSS and CPU of one agent verb
# (sky-node agent beside true and sky-server version), and the bootstrap
# of a fresh SSH host (EnsureBinary of sky-node, and of sky-server, against plain scp of the
# same file); SKYGO_BENCH_NODE_RUNS sets the runs.
bench-node: build
	SKYGO_BENCH_NODE=1 SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench 'NodeRuntime|BootstrapNode' -benchtime 1x -count 1 -v ./cmd/sky-node ./internal/infra/ssh

# bench-serve: the SkyServe load balancer (`sky-lb serve-lb` in front of two
# replica processes) against one replica served directly: req/s and p50
# latency at 32 and 1 connections, and the load balancer's RSS; run once.
# SKYGO_BENCH_SERVE_SECONDS sets each measurement's length (default 5),
# SKYGO_BENCH_LB_ENV="GOMAXPROCS=1" adds environment to the load balancer.
bench-serve: build
	SKYGO_BENCH_SERVE=1 SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench 'ServeLB' -benchtime 1x -count 1 -v ./internal/serve/lb

# bench-sdk: the Python SDK: `python3 -c 'import sky'` against
# `python3 -c pass`, and sky.get(sky.status()) against a direct GET
# /api/health from the same process, for python3 on PATH and
# /usr/bin/python3; SKYGO_BENCH_SDK_RUNS sets the runs (default 21).
bench-sdk: build
	SKYGO_TEST_BINARY=$(CURDIR)/$(BIN) python3 python/bench/bench_sdk.py

# fuzz: the YAML loader fuzzer; FUZZTIME=5m make fuzz
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime $(FUZZTIME) ./internal/task

clean:
	rm -rf bin
	find $(BUNDLE) -mindepth 1 ! -name README.md -delete

# catalog-snapshot: refresh the price catalog embedded in the binary
# (internal/catalog/embedded) from a v8 catalog directory or URL.
CATALOG_FROM ?= $(abspath $(CURDIR)/../shared/catalog/v8)
catalog-snapshot:
	cd internal/catalog/embedded && $(GO) run gen.go -from $(CATALOG_FROM)
