# Fence — the two set-up commands are `make run` and `make test`.
GO       ?= go
LISTEN   ?= 127.0.0.1:7420
DATA_DIR ?= ./fence-data
BIN      := bin/fence

.PHONY: run build test test-unit test-e2e ui-screenshots test-short vet fmt bench bench-boundaries bench-quick bench-cluster soak mutate proto proto-tools lab clean chaos chaos-plantbug grpcurl

## run: build and start a single-node server on $(LISTEN) with its data in $(DATA_DIR)
run: build
	./$(BIN) serve --listen $(LISTEN) --data-dir $(DATA_DIR)

## build: build the fence binary into bin/
build:
	$(GO) build -o $(BIN) ./cmd/fence

## test: every tier, with the race detector: the unit tier and the end-to-end
##   tier (files tagged e2e: real fence processes, doc clients, the chaos
##   harness) in one go test run, and beside it the bench module's smoke test
##   (its own go.mod, so its own go test; its output goes to bin/bench-test.log
##   and is printed when the main run ends; make test fails if either fails).
##   docs/testing.md says what each tier holds and how long it takes.
##   The two longest packages are named first: go test starts packages in the
##   order given, and system_test and testkit/chaos (about 5 minutes each) last
##   in ./... order would end the run minutes after everything else. The bench
##   smoke test (about 1.5 minutes, mostly waiting on its servers) ran after the
##   main run until it was started beside it.
LONG_PKGS  = ./system_test/ ./testkit/chaos/
TEST_CMD   = $(GO) test -race -count=1 -tags e2e -timeout 14m $(LONG_PKGS) ./...
BENCH_TEST = $(GO) test -race -count=1 -timeout 10m ./...
test: vet
	@mkdir -p bin; \
	echo "(cd bench && $(BENCH_TEST)) > bin/bench-test.log 2>&1 &  # beside the main run"; \
	(cd bench && $(BENCH_TEST)) > bin/bench-test.log 2>&1 & bench=$$!; \
	echo "$(TEST_CMD)"; \
	$(TEST_CMD); main=$$?; \
	wait $$bench; benchrc=$$?; \
	echo "=== bench module (cd bench && $(BENCH_TEST)): exit status $$benchrc"; \
	cat bin/bench-test.log; \
	if [ $$main -ne 0 ] || [ $$benchrc -ne 0 ]; then \
	  echo "make test: FAILED (main go test exit $$main, bench module exit $$benchrc)"; exit 1; \
	fi

## test-unit: the quick loop: in-process tests only (`go test ./...` is the same
##   set; the guard tests use the local databases and skip loudly without them)
test-unit:
	$(GO) test -race -count=1 -timeout 10m ./...

## test-e2e: only the packages that have end-to-end tests, with -tags e2e
E2E_PKGS = $(shell grep -rl --include='*_test.go' '^//go:build e2e' . | grep -v '^./bench/' | xargs -n1 dirname | sort -u)
test-e2e:
	$(GO) test -race -count=1 -tags e2e -timeout 14m $(LONG_PKGS) $(E2E_PKGS)

## ui-screenshots: the operator page's tests, writing docs/ui/*.png (the pictures of
##   docs/operations.md); an ordinary run of the tests leaves them as they are
ui-screenshots:
	FENCE_UI_SCREENSHOTS=1 $(GO) test -count=1 -tags e2e -run 'TestUI' ./system_test/

## test-short: the unit tier without -race and without the long property runs
test-short:
	$(GO) test -count=1 -short ./...

## vet: both tiers (-tags e2e compiles every file the untagged build does, and the e2e ones)
vet:
	$(GO) vet -tags e2e ./...
	$(GO) vet -tags plantbug ./state/ ./state/internal/plant/

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: the benchmarks behind docs/benchmarks.md: the package benchmarks, then
##   bench/cmd/fencebench (Fence against etcd 3.7.3 and Redis, servers in their own
##   processes; rewrites its section of docs/benchmarks.md). The bench/ module is its
##   own go.mod, so etcd never enters this one. BENCH_FLAGS adds runner flags
##   (e.g. BENCH_FLAGS="-held 200000 -storm 20000"; `go run ./cmd/fencebench -h` in bench/).
BENCH_FLAGS ?=
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./state/ ./node/ ./server/ ./guard/...
	cd bench && $(GO) run ./cmd/fencebench -docs ../docs/benchmarks.md $(BENCH_FLAGS)

## bench-cluster: 3-node Fence against 3-node etcd (workloads 1-3 at 1/16/64 clients, each node its own
##   process) and failover time (kill -9 of the leader -> first grant, 5 runs per system); rewrites the
##   "cluster" section of docs/benchmarks.md. BENCH_FLAGS adds runner flags (e.g. "-rounds 1 -failover 7").
bench-cluster:
	cd bench && $(GO) run ./cmd/fencebench -cluster 3 -failover 5 -docs ../docs/benchmarks.md $(BENCH_FLAGS)

## bench-boundaries: workloads 6-7 (issue 23: leader election hand-off, an order's 3 SKUs as one set) for
##   fence-unary, fence-session and etcd, 3 rounds; rewrites the "boundaries" section of docs/benchmarks.md.
##   BENCH_FLAGS adds runner flags (e.g. "-w7-clients 16 -rounds 1", or "-cluster 3" for 3-node clusters).
bench-boundaries:
	cd bench && $(GO) run ./cmd/fencebench -workloads 6,7 -systems fence-unary,fence-session,etcd -section boundaries -docs ../docs/benchmarks.md $(BENCH_FLAGS)

## soak: the steady-state soak (issue 24): a 3-node cluster, each node its own process, ~300 cycles/s
##   (session acquire, fenced Write and Add with op_ids, release), the leader killed with kill -9 and
##   restarted every 4 minutes; samples every 10 s into bench/results/soak-*.csv, the plot into
##   docs/soak.svg, the pass/fail of each target into the "soak" section of docs/benchmarks.md.
##   make soak SOAK_DURATION=20m; SOAK_FLAGS adds runner flags (e.g. "-soak-rate 200 -soak-kill-every 2m").
SOAK_DURATION ?= 1h
SOAK_FLAGS    ?=
soak:
	cd bench && $(GO) run ./cmd/fencebench -soak -soak-duration $(SOAK_DURATION) -soak-svg ../docs/soak.svg -docs ../docs/benchmarks.md $(SOAK_FLAGS)

## bench-quick: the runner in quick mode (under 3 minutes on 2 cores); prints its tables, writes no file
bench-quick:
	cd bench && $(GO) run ./cmd/fencebench -quick $(BENCH_FLAGS)

## chaos: a fault run and the control run (testkit/chaos; docs/reliability.md); both have
##   the forger (forged tokens at the PostgreSQL guard: none accepted; the control's keyless guard accepts them).
##   make chaos DURATION=10m SEED=N     # SEED=0 picks one and prints it
##   make chaos NODES=5                 # a 5-node raft cluster (1, 3 or 5; adds the cluster fault kinds)
##   CHAOS_FLAGS adds runner flags (`bin/fence-chaos run -h`), e.g. CHAOS_FLAGS="-workers 8 -faults worker-pause,server-kill"
DURATION         ?= 10m
SEED             ?= 0
NODES            ?= 1
CONTROL_DURATION ?= 1m
PLANT_DURATION   ?= 1m
CHAOS_FLAGS      ?=
chaos: build
	$(GO) build -o bin/fence-chaos ./cmd/fence-chaos
	./bin/fence-chaos run -fence $(BIN) -nodes $(NODES) -duration $(DURATION) -seed $(SEED) $(CHAOS_FLAGS)
	./bin/fence-chaos run -fence $(BIN) -nodes $(NODES) -duration $(CONTROL_DURATION) -seed $(SEED) -control $(CHAOS_FLAGS)

## chaos-plantbug: build fence with the planted bugs (-tags plantbug) and show the harness catches each
chaos-plantbug:
	$(GO) build -tags plantbug -o bin/fence-plantbug ./cmd/fence
	$(GO) build -o bin/fence-chaos ./cmd/fence-chaos
	@for b in skip-compare grant-held ids-forgotten; do \
	  echo "=== planted bug $$b"; \
	  ./bin/fence-chaos run -fence bin/fence-plantbug -nodes $(NODES) -plantbug $$b -expect-caught -duration $(PLANT_DURATION) -seed $(SEED) $(CHAOS_FLAGS) || exit 1; \
	done

## mutate: mutation testing with gremlins, one package at a time (scores in docs/testing.md)
##   make mutate MUTATE_PKGS="state guard/internal/sqlguard"   # a subset
##   MUTATE_TIMEOUT: a mutant's test run may take this many times the package's
##   measured test time before it counts as TIMED OUT (generous for a noisy 2-core box)
GREMLINS_VERSION ?= v0.6.0
GREMLINS         := bin/tools/gremlins-$(GREMLINS_VERSION)
MUTATE_PKGS      ?= state node client guard/internal/sqlguard guard/postgres guard/sqlite guard/redis guard/httpguard
MUTATE_WORKERS   ?= 1
MUTATE_TIMEOUT   ?= 8
MUTATE_OUT       ?= bin/mutate
##   MUTATE_FLAGS: more gremlins flags, e.g. a subset of a big package's files:
##   MUTATE_FLAGS="-E '^(?:apply|backup|cluster).*\.go$$'" (exclude-files regexps)
MUTATE_FLAGS     ?=

mutate: $(GREMLINS)
	@mkdir -p $(MUTATE_OUT)
	@for p in $(MUTATE_PKGS); do \
	  out=$(MUTATE_OUT)/$$(echo $$p | tr / _); \
	  echo "=== gremlins $$p (log $$out.log, results $$out.json)"; \
	  GOFLAGS="$$GOFLAGS -count=1" ./$(GREMLINS) unleash --workers $(MUTATE_WORKERS) \
	    --timeout-coefficient $(MUTATE_TIMEOUT) $(MUTATE_FLAGS) -o $$out.json $(CURDIR)/$$p > $$out.log 2>&1; \
	  status=$$?; grep -E '^(Killed|Lived|Timed out|Not covered|Not viable|Skipped|Test efficacy|Mutator coverage)' $$out.log; \
	  grep -E 'LIVED|TIMED OUT' $$out.log; \
	  [ $$status -eq 0 ] || { echo "gremlins failed on $$p (exit $$status), see $$out.log"; exit 1; }; \
	done

$(GREMLINS):
	@mkdir -p bin/tools
	GOBIN=$(CURDIR)/bin/tools/.install $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	mv bin/tools/.install/gremlins $@

## lab: the paused-worker story (docs/story.md) against embedded servers
lab: build
	./$(BIN) lab

## proto: regenerate api/fence/v1 and state/internal/statepb (the log and snapshot format)
##   (needs protoc, protoc-gen-go, protoc-gen-connect-go: make proto-tools)
proto:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc -I api \
	  --go_out=. --go_opt=module=github.com/fenceworks/fence \
	  --connect-go_out=. --connect-go_opt=module=github.com/fenceworks/fence \
	  api/fence/v1/fence.proto
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc -I . \
	  --go_out=. --go_opt=module=github.com/fenceworks/fence \
	  state/internal/statepb/state.proto

## proto-tools: install what `make proto` runs: protoc 3.21.12 (Debian 12's protobuf-compiler,
##   the version the checked-in code was generated with) and the Go plugins at the versions of
##   go.mod (google.golang.org/protobuf, connectrpc.com/connect), so regenerating changes nothing
##   but what the .proto changed. apt-get needs root.
PROTOC_GEN_GO_VERSION      ?= v1.36.12
PROTOC_GEN_CONNECT_VERSION ?= v1.19.1
proto-tools:
	command -v protoc >/dev/null || { apt-get update && apt-get install -y protobuf-compiler; }
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	$(GO) install connectrpc.com/connect/cmd/protoc-gen-connect-go@$(PROTOC_GEN_CONNECT_VERSION)

## grpcurl: bin/tools/grpcurl-$(GRPCURL_VERSION), the grpcurl server/grpc_test.go runs against a real
##   server (reflection, grpc.health.v1); the test builds it itself when missing (keep the versions in step)
GRPCURL_VERSION ?= v1.9.3
GRPCURL         := bin/tools/grpcurl-$(GRPCURL_VERSION)
grpcurl: $(GRPCURL)
$(GRPCURL):
	@mkdir -p bin/tools
	GOBIN=$(CURDIR)/bin/tools/.install-grpcurl $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
	mv bin/tools/.install-grpcurl/grpcurl $@

clean:
	rm -rf bin
