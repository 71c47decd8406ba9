# Warden: the commands CI and people run. `make help` lists them.

SHELL       := /bin/bash
GO          ?= go
TOOLS       := $(CURDIR)/.tools/bin
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -s -w -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
CONFORMANCE := ../shared/reference/macp/conformance
ATTACKS     := test/attacks/macp
BENCHCOUNT  ?= 6

.PHONY: help build unit test lint generate bench demo fuzz clean peers

help:
	@echo "make build     build bin/warden"
	@echo "make test      everything CI runs (lint, installs the real peers, tests with -race incl. real-peer tests)"
	@echo "make peers     install the MACP runtime and Python SDK at pinned versions into .peers/"
	@echo "make unit      Go unit tests with -race"
	@echo "make lint      gofmt, go vet, staticcheck (installed at a pinned version)"
	@echo "make generate  regenerate the protobuf Go code (installs protoc and the plugins)"
	@echo "make bench     micro-benchmarks with -benchmem, summarised by benchstat"
	@echo "make demo      start the real MACP runtime and Warden, play a story with the Python SDK, then replay the transcripts"
	@echo "make fuzz      run every fuzz target for FUZZTIME (default 20s) each"

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/warden ./cmd/warden

unit:
	$(GO) test -race -count=1 ./...

peers:
	bash scripts/peers.sh

test: lint peers unit build
	@echo "== replay: conformance fixtures and attack transcripts through bin/warden"
	./bin/warden replay $(CONFORMANCE)/*.json > /dev/null
	./bin/warden replay $(ATTACKS)/*.json > /dev/null
	./bin/warden check > /dev/null

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install $(STATICCHECK)

$(TOOLS)/benchstat:
	GOBIN=$(TOOLS) $(GO) install $(BENCHSTAT)

lint: $(TOOLS)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

generate:
	bash scripts/generate.sh

bench: $(TOOLS)/benchstat
	@mkdir -p bench/results
	$(GO) test -run='^$$' -bench=. -benchmem -count=$(BENCHCOUNT) ./policies/ ./proxy/ ./authn/ | tee bench/results/micro.txt
	$(TOOLS)/benchstat bench/results/micro.txt

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
