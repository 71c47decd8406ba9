# Warden: the commands CI and people run. `make help` lists them.

SHELL       := /bin/bash
GO          ?= go
TOOLS       := $(CURDIR)/.tools/bin
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -s -w -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
CONFORMANCE := testdata/macp/conformance
# The spec's fixtures (copied verbatim into testdata/macp, see its SOURCE.md),
# each one Warden keeps a corrected copy of in test/conformance (where it
# disagrees with the runtime) replaced by it.
OVERRIDES   := $(wildcard test/conformance/*.json)
# Go modules of their own beside the product's, so that their dependencies
# (gonum plot, HdrHistogram; the Kubernetes API types) stay out of the
# product's go.mod; each requires the product through replace => ../.
MODULES     := bench deploy
# each: run a command in the product module and then in every one of MODULES
each = $(1) ./... && for m in $(MODULES); do (cd $$m && $(1) ./...) || exit 1; done
FIXTURES    := $(filter-out $(addprefix $(CONFORMANCE)/,$(notdir $(OVERRIDES))),$(wildcard $(CONFORMANCE)/*.json)) $(OVERRIDES)
ATTACKS     := test/attacks/macp
# ORACLE is the build tag of the test oracle: the product plus the retired
# grpc-go MACP front door (proxy/macp/oracle.go), which the tests hold the
# relay to. ORACLEPKGS are the packages whose tests compare the two doors.
ORACLE      := wardenoracle
ORACLEPKGS  := ./proxy/macp/
BENCHCOUNT  ?= 6

.PHONY: help build unit test lint generate bench demo fuzz clean peers h2spec

help:
	@echo "make build     build bin/warden (the product) and bin/warden-oracle (the test oracle: -tags wardenoracle, the grpc-go MACP door too)"
	@echo "make test      everything CI runs (lint, installs the real peers, tests with -race incl. real-peer tests)"
	@echo "make peers     install the real peers (MACP, MCP, A2A) at pinned versions (scripts/peers.sh)"
	@echo "make unit      Go unit tests with -race (the product build, then $(ORACLEPKGS) with the test oracle built in: -tags $(ORACLE)), then the allocation bounds (TestXxxAllocs) without -race"
	@echo "make lint      gofmt, go vet, staticcheck (installed at a pinned version)"
	@echo "make generate  regenerate the protobuf Go code (installs protoc and the plugins)"
	@echo "make bench     micro-benchmarks (benchstat) and the end-to-end load harness: direct, Warden as it ships, the null grpc-go / frame relay / net/http hops and nginx, with a CPU profile of Warden per scenario in the record (QUICK=1: a few minutes; PROFILE=dir: Warden's profiles at saturation too)"
	@echo "make demo      start the real MACP runtime and Warden, play a story with the Python SDK, replay the transcripts, then one A2A hijack direct and through Warden"
	@echo "make fuzz      run every fuzz target for FUZZTIME (default 20s) each"
	@echo "make h2spec    h2spec (pinned in bench/tools/h2spec) against the frame relay's listener (proxy/frames) and the MACP sidecar's relay front door (proxy/macp)"

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/warden ./cmd/warden
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -tags $(ORACLE) -o bin/warden-oracle ./cmd/warden

# unit: peer tests skip with a reason when the peers are not installed;
# make test installs them first and sets WARDEN_REQUIRE_PEERS=1, so that a
# missing peer fails there instead. The product's build first (proxy/macp's
# tests on the relay alone), then the oracle's packages with the oracle
# built in (both doors, compared).
unit:
	$(call each,$(GO) test -race -count=1 -timeout 30m)
	$(GO) test -race -count=1 -timeout 30m -tags $(ORACLE) $(ORACLEPKGS)
	$(GO) test -count=1 -run Allocs ./proxy/... ./rules/... # the allocation bounds, which hold without the race detector (!race)

peers:
	bash scripts/peers.sh

test: export WARDEN_REQUIRE_PEERS = 1
test: lint peers unit build h2spec
	@echo "== replay: conformance fixtures and attack transcripts through bin/warden"
	./bin/warden replay $(FIXTURES) > /dev/null
	./bin/warden replay $(ATTACKS)/*.json > /dev/null
	./bin/warden check > /dev/null
	@echo "== demo: the refusal excerpt never dies of SIGPIPE (20 runs)"
	bash scripts/demo_test.sh 20

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install $(STATICCHECK)

$(TOOLS)/benchstat:
	GOBIN=$(TOOLS) $(GO) install $(BENCHSTAT)

# h2spec: built from bench/tools/h2spec, a module of its own whose go.mod and
# go.sum pin h2spec and its dependencies (fetched through the Go module
# proxy, or from the module cache offline).
H2SPEC ?= $(TOOLS)/h2spec
$(H2SPEC):
	cd bench/tools/h2spec && $(GO) build -o $(abspath $(H2SPEC)) github.com/summerwind/h2spec/cmd/h2spec

h2spec: $(H2SPEC)
	set -o pipefail; H2SPEC=$(abspath $(H2SPEC)) $(GO) test -race -count=1 -run '^TestH2spec$$' -v ./proxy/frames/ ./proxy/macp/ | grep -E '^(---|ok|FAIL)|h2spec against|h2spec case'

lint: $(TOOLS)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@# go.mod and go.sum say exactly what the code imports, in every module
	$(GO) mod tidy -diff && for m in $(MODULES) test/peers/a2a-go; do (cd $$m && $(GO) mod tidy -diff) || exit 1; done
	$(call each,$(GO) vet)
	$(call each,$(TOOLS)/staticcheck)
	@# the test oracle's build (-tags wardenoracle) as well
	$(GO) vet -tags $(ORACLE) ./...
	$(TOOLS)/staticcheck -tags $(ORACLE) ./...
	@# the a2a-go test peer is a module of its own, outside ./...
	cd test/peers/a2a-go && $(GO) vet ./... && $(TOOLS)/staticcheck ./...

generate:
	bash scripts/generate.sh

# bench: the micro-benchmarks of every package below that has some (with
# the test oracle built in, so that proxy/macp's grpc-go door benchmarks run
# beside the relay's), then the
# end-to-end harness (bench/cmd/e2e: the real runtime direct and through
# bin/warden, ext_authz, MCP, memory) whose table also carries the micro
# figures, and Warden's CPU profile per scenario at its measured rate
# (bench/results/<date>-profiles/, summarized in the table). QUICK=1:
# -count=2, short -benchtime, short runs, 10,000 sessions; its micro output
# goes to the git-ignored bench/results/tmp/. PROFILE=dir: Warden's CPU and
# heap profiles at saturation too, per scenario, into dir.
BENCHPKGS = $(sort $(patsubst %/,./%/,$(dir $(shell grep -rl --include='*_test.go' '^func Benchmark' policies proxy authn rules wire))))
ifneq ($(QUICK),)
BENCHCOUNT := 2
BENCHTIME  := -benchtime=100ms
MICRO      := bench/results/tmp/micro-quick.txt
E2EFLAGS   := -quick
else
BENCHTIME  :=
MICRO      := bench/results/micro.txt
E2EFLAGS   :=
endif

bench: $(TOOLS)/benchstat peers build
	@mkdir -p bench/results/tmp
	$(GO) test -tags $(ORACLE) -run='^$$' -bench=. -benchmem -count=$(BENCHCOUNT) $(BENCHTIME) $(BENCHPKGS) | tee $(MICRO)
	$(TOOLS)/benchstat $(MICRO)
	$(GO) build -C bench -o $(CURDIR)/bin/e2e ./cmd/e2e
	bin/e2e $(E2EFLAGS) $(if $(PROFILE),-profile $(PROFILE)) -micro $(MICRO)

demo:
	bash scripts/demo.sh

FUZZTIME ?= 20s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf bin
