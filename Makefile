# make test: everything CI runs. It installs what the tests need when it is
# missing (a C compiler for the race detector, git for the worktree tests,
# chromium for the dashboard's browser tests) and then vets (for Linux,
# macOS and Windows), builds for all three on amd64 and arm64 without cgo,
# checks the formatting, runs every test with the race detector in random
# order, runs each fuzz target briefly, and builds the container image and
# checks it starts healthy as non-root (skipped, saying why, where no
# container runtime works).

GO       ?= go
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report a spurious "context deadline exceeded" as it stops (golang/go#75804).
# make fuzz runs each target for FUZZTIME inputs; make test for the short
# budget of TEST_FUZZTIME.
FUZZTIME ?= 200000x
TEST_FUZZTIME ?= 20000x
# The API's targets serve each input through the handler and a SQLite
# store, about ten times slower than the parsers' targets: a tenth of the
# count keeps their share near the others'.
FUZZTIME_API ?= 20000x
TEST_FUZZTIME_API ?= 4000x

.PHONY: test deps vet cross fmt-check unit test-fuzz fuzz bench bench-peer build screenshots image-test

test: deps vet cross fmt-check unit test-fuzz image-test

# The fuzz targets with the short budget of make test.
test-fuzz:
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME) FUZZTIME_API=$(TEST_FUZZTIME_API)

# The race detector needs cgo and a C compiler; the worktree tests run git
# (without it they are skipped, so make test would not test worktrees).
deps:
	@command -v gcc >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing gcc for the race detector"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null; \
		else \
			echo "the race detector needs gcc: install it (e.g. apt-get install gcc)"; exit 1; \
		fi; }
	@command -v git >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing git for the worktree tests"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git >/dev/null; \
		else \
			echo "the worktree tests need git: install it (e.g. apt-get install git)"; exit 1; \
		fi; }
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing chromium for the dashboard's browser tests"; \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
				echo "chromium could not be installed: the dashboard's browser tests will be skipped"; \
		else \
			echo "chromium is missing and cannot be installed here (not root, or no apt-get): the dashboard's browser tests will be skipped"; \
		fi; }

vet:
	$(GO) vet ./...

# The one binary must build without cgo for Linux, macOS and Windows, on
# amd64 and arm64, and vet must pass for each system: unix-only code lives
# in build-tagged files.
CROSS_OS   ?= linux darwin windows
CROSS_ARCH ?= amd64 arm64
cross:
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	@for os in $(CROSS_OS); do for arch in $(CROSS_ARCH); do \
		echo "CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build ./..."; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build ./... || { echo "cross: the build for $$os/$$arch fails"; exit 1; }; \
	done; done

# The container image: built from the Dockerfile, started with a workspace
# init wrote, healthy as uid 65532. Skipped, with the reason, when neither
# docker nor podman can build and run here (CONTAINER_RUNTIME picks one).
image-test:
	./deploy/image-test.sh

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 -shuffle=on -timeout 30m ./...

# Each fuzz target for a bounded count: parsers of outside input, the API's
# requests and the configuration.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzMarkdownContract$$' -fuzztime $(FUZZTIME) ./artifact/
	$(GO) test -run '^$$' -fuzz '^FuzzFastMarkdown$$' -fuzztime $(FUZZTIME) ./artifact/
	$(GO) test -run '^$$' -fuzz '^FuzzParseSubmission$$' -fuzztime $(FUZZTIME) ./execsvc/
	$(GO) test -run '^$$' -fuzz '^FuzzExecuteArguments$$' -fuzztime $(FUZZTIME) ./tool/
	$(GO) test -run '^$$' -fuzz '^FuzzLookup$$' -fuzztime $(FUZZTIME) ./tool/fstool/
	$(GO) test -run '^$$' -fuzz '^FuzzExtract$$' -fuzztime $(FUZZTIME) ./tool/webfetch/
	$(GO) test -run '^$$' -fuzz '^FuzzParseSignal$$' -fuzztime $(FUZZTIME) ./route/
	$(GO) test -run '^$$' -fuzz '^FuzzLabel$$' -fuzztime $(FUZZTIME) ./route/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./agentout/
	$(GO) test -run '^$$' -fuzz '^FuzzBuild$$' -fuzztime $(FUZZTIME) ./taskprompt/
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./webhook/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./config/
	$(GO) test -run '^$$' -fuzz '^FuzzEnvOverrides$$' -fuzztime $(FUZZTIME) ./config/
	$(GO) test -run '^$$' -fuzz '^FuzzRequestBodies$$' -fuzztime $(FUZZTIME_API) ./http/
	$(GO) test -run '^$$' -fuzz '^FuzzQueryParameters$$' -fuzztime $(FUZZTIME_API) ./http/
	$(GO) test -run '^$$' -fuzz '^FuzzPathValues$$' -fuzztime $(FUZZTIME_API) ./http/
	$(GO) test -run '^$$' -fuzz '^FuzzHeaders$$' -fuzztime $(FUZZTIME_API) ./http/

# Benchmarks: run them where creating files is cheap (TMPDIR on a normal
# directory) and compare runs with benchstat.
bench:
	$(GO) test -run '^$$' -bench . -count 10 ./engine/

# bench-peer: agentrunner's durable step against LangGraph.js's, side by
# side, PAIRS pairs in turn, in BENCH_DIR (on the disk to measure, not
# tmpfs), with one fsync and the creation of one file measured in each pair
# (its create column: hundreds of µs mean ext4 without a journal is slow
# after deletions). Every file of the series stays in one directory under
# BENCH_DIR until the last pair, because deleting them would slow the
# creation of the next runs' files for minutes. It needs Node.js and, once,
# the npm registry; see bench/peers/langgraph/README.md. make test does not run it.
PAIRS ?= 5
BENCH_DIR ?= $(CURDIR)/.bench-peer
PEER_STEPS ?= 600
PEER_N ?= 100
PEER_WARMUP ?= 20
# PEER_STEP: the BenchmarkStep to compare, publish or publish-on-read.
PEER_STEP ?= publish
LANGGRAPH = bench/peers/langgraph

bench-peer:
	@command -v node >/dev/null 2>&1 || { echo "bench-peer needs Node.js 20 or newer, and npm"; exit 1; }
	@if [ ! -f $(LANGGRAPH)/node_modules/.package-lock.json ]; then \
		echo "bench-peer: installing LangGraph.js in $(LANGGRAPH) (npm ci)"; \
		(cd $(LANGGRAPH) && npm ci --no-audit --no-fund) || { \
			echo "bench-peer: npm ci failed in $(LANGGRAPH): it needs the npm registry (npm config get registry) to install LangGraph.js once, and a C++ compiler if no prebuilt better-sqlite3 fits this Node.js"; exit 1; }; \
	fi
	@mkdir -p "$(BENCH_DIR)"
	@fs=$$(stat -f -c %T "$(BENCH_DIR)" 2>/dev/null); echo "bench-peer: $(BENCH_DIR) is on $${fs:-an unknown file system}"; \
		if [ "$$fs" = tmpfs ]; then echo "bench-peer: WARNING: tmpfs has no disk, so the figures are not a durable step's; set BENCH_DIR to a directory on a disk"; fi
	$(GO) test -c -o "$(BENCH_DIR)/engine.test" ./engine/
	$(GO) run ./bench/peers/compare -pairs $(PAIRS) -dir "$(BENCH_DIR)" -engine "$(BENCH_DIR)/engine.test" \
		-langgraph $(LANGGRAPH) -steps $(PEER_STEPS) -n $(PEER_N) -warmup $(PEER_WARMUP) -step $(PEER_STEP)

# VERSION is stamped into the binary (agentrunner version, build_info).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o agentrunner ./cmd/agentrunner

# screenshots: the dashboard's main pages, taken in headless Chromium from
# the review example served by the real binary, into docs/ (the README
# shows them).
screenshots: deps
	DASHBOARD_SCREENSHOTS=$(CURDIR)/docs $(GO) test -count=1 -run '^TestScreenshots$$' ./dashboard/
