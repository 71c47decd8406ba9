#!/usr/bin/env bash
# Installs the real peers the black-box tests drive, at pinned versions: into
# the git-ignored .peers/ folder the MACP reference runtime (crates.io), the
# MACP Python SDK (PyPI, in a virtualenv) and the Go MCP SDK's conformance
# everything-server (Go modules); nginx from Debian (make bench's baseline
# hop, all only); into the git-ignored
# test/peers/mcp/node_modules the MCP TypeScript SDK, the MCP conformance suite
# and Node 22 to run it (npm, from the committed package-lock.json); and
# Debian's redis-server, which the tests start on a free loopback port (never
# as a system service) for Warden's shared state, and Debian's chromium, which
# renders warden audit's HTML report headless. A second run finds them and
# skips the work.
#
# For A2A: the a2a-go v2.3.1 test server and client (test/peers/a2a-go, a Go
# module of its own, built into .peers/bin/a2a-go-{server,client}; its
# modules stay in the Go module cache so the tests can rebuild them
# offline), the Python a2a-sdk 1.3.0
# (.peers/a2a-venv) and the @a2a-js/sdk 1.3.0 client and Express server
# (test/peers/a2a-js/node_modules).
#
# usage: scripts/peers.sh [all|macp|mcp|a2a]
#   all   everything, nginx included (default; make test, make bench)
#   macp  the MACP runtime and the Python SDK only (make demo; no npm needed)
#   mcp   the MCP node peers, the go-sdk everything-server, redis-server and chromium only
#   a2a   the A2A peers only (a2a-go server and client, a2a-sdk, @a2a-js/sdk)
set -euo pipefail
cd "$(dirname "$0")/.."

WHAT=${1:-all}
case "$WHAT" in
  all|macp|mcp|a2a) ;;
  *) echo "usage: $0 [all|macp|mcp|a2a]" >&2; exit 2 ;;
esac
want() { [ "$WHAT" = all ] || [ "$WHAT" = "$1" ]; }

RUNTIME_VERSION=0.13.0
GO_MCP_SDK_VERSION=v1.8.0
PEERS=$PWD/.peers

log() { echo "peers: $*" >&2; }
mkdir -p "$PEERS"

ready=()

# npm_peers DIR WHAT installs DIR's node_modules from its committed lock file
# (npm ci) unless the stamp, a copy of the lock file npm ci installed, matches.
npm_peers() {
  if [ -d "$1/node_modules" ] && cmp -s "$1/package-lock.json" "$1/node_modules/.warden-lock" 2>/dev/null; then
    log "$2 already installed"
  else
    log "installing $2 into $1/node_modules (npm ci)"
    (cd "$1" && npm ci --no-audit --no-fund --loglevel=error >&2)
    cp "$1/package-lock.json" "$1/node_modules/.warden-lock"
  fi
}
install_macp() {
  # protoc is needed to build the runtime.
  if ! command -v protoc >/dev/null; then
    log "installing protobuf-compiler (Debian)"
    apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null
  fi

  # The MACP reference runtime.
  if [ -x "$PEERS/cargo/bin/macp-runtime" ] && [ -f "$PEERS/cargo/.version" ] && [ "$(cat "$PEERS/cargo/.version")" = "$RUNTIME_VERSION" ]; then
    log "macp-runtime $RUNTIME_VERSION already installed"
  else
    log "building macp-runtime $RUNTIME_VERSION (several minutes on 2 cores)"
    # --locked first; the published lock file names a webpki-roots release the
    # registry no longer serves, so fall back to the newest compatible versions.
    if ! cargo install --quiet --locked --version "$RUNTIME_VERSION" --root "$PEERS/cargo" macp-runtime 2>"$PEERS/cargo-locked.log"; then
      log "the published Cargo.lock does not resolve here; building with compatible versions"
      cargo install --quiet --version "$RUNTIME_VERSION" --root "$PEERS/cargo" macp-runtime
    fi
    echo "$RUNTIME_VERSION" > "$PEERS/cargo/.version"
  fi

  # The MACP Python SDK.
  if [ -x "$PEERS/venv/bin/python" ] && cmp -s test/peers/requirements.txt "$PEERS/venv/.requirements" 2>/dev/null; then
    log "macp-sdk-python already installed"
  else
    log "installing the MACP Python SDK into .peers/venv"
    python3 -m venv "$PEERS/venv"
    "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check -r test/peers/requirements.txt
    cp test/peers/requirements.txt "$PEERS/venv/.requirements"
  fi
  ready+=("$PEERS/cargo/bin/macp-runtime" "$PEERS/venv/bin/python")
}

install_mcp() {
  # Redis, for the shared state of MCP sidecar replicas (the tests run their
  # own redis-server; the package's service is not used).
  if ! command -v redis-server >/dev/null; then
    log "installing redis-server (Debian)"
    apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
  fi

  # Chromium, headless: the tests open warden audit's HTML report in it and
  # read the rendered table back (Debian's package, as Debian pins it).
  if ! command -v chromium >/dev/null; then
    log "installing chromium (Debian)"
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  fi

  # The MCP TypeScript SDK, the conformance suite and Node 22 (npm, pinned by the
  # committed lock file). The stamp is a copy of the lock file npm ci installed.
  MCP_DIR=test/peers/mcp
  npm_peers "$MCP_DIR" "the MCP node peers"

  # The Go MCP SDK's conformance everything-server. go install pkg@version builds
  # it in module-aware mode outside this repo's go.mod, which it does not touch.
  ES=$PEERS/bin/everything-server
  if [ -x "$ES" ] && [ "$(go version -m "$ES" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/modelcontextprotocol/go-sdk" { print $3 }')" = "$GO_MCP_SDK_VERSION" ]; then
    log "everything-server (go-sdk $GO_MCP_SDK_VERSION) already installed"
  else
    log "building the go-sdk $GO_MCP_SDK_VERSION conformance everything-server"
    GOBIN=$PEERS/bin go install "github.com/modelcontextprotocol/go-sdk/conformance/everything-server@$GO_MCP_SDK_VERSION"
  fi
  ready+=("$ES" "$MCP_DIR/node_modules (sdk, conformance, node 22)" "$(command -v redis-server)")

  # The MCP Python SDK 2.3.0 in a virtualenv of its own, every package
  # pinned (test/peers/mcp-py/requirements.txt is a pip freeze).
  if [ -x "$PEERS/mcp-venv/bin/python" ] && cmp -s test/peers/mcp-py/requirements.txt "$PEERS/mcp-venv/.requirements" 2>/dev/null; then
    log "MCP Python SDK already installed"
  else
    log "installing the MCP Python SDK into .peers/mcp-venv"
    python3 -m venv "$PEERS/mcp-venv"
    "$PEERS/mcp-venv/bin/pip" install --quiet --disable-pip-version-check -r test/peers/mcp-py/requirements.txt
    cp test/peers/mcp-py/requirements.txt "$PEERS/mcp-venv/.requirements"
  fi
  ready+=("$PEERS/mcp-venv/bin/python (MCP Python SDK)")
}

install_a2a() {
  # The a2a-go v2.3.1 server and client. Their own go.mod/go.sum pin the SDK;
  # the stamp is a hash of the module's sources, so an edited peer is rebuilt.
  A2A_GO=test/peers/a2a-go
  BIN=$PEERS/bin/a2a-go-server
  sum=$(cat "$A2A_GO"/go.mod "$A2A_GO"/go.sum "$A2A_GO"/*.go "$A2A_GO"/client/*.go | sha256sum | cut -d' ' -f1)
  if [ -x "$BIN" ] && [ -x "$PEERS/bin/a2a-go-client" ] && [ "$(cat "$BIN.sum" 2>/dev/null)" = "$sum" ]; then
    log "a2a-go-server and a2a-go-client (a2a-go v2.3.1) already installed"
  else
    log "building the a2a-go v2.3.1 server and client into $PEERS/bin"
    (cd "$A2A_GO" && go mod download && go build -trimpath -o "$BIN" . && go build -trimpath -o "$PEERS/bin/a2a-go-client" ./client)
    echo "$sum" > "$BIN.sum"
  fi
  ready+=("$BIN" "$PEERS/bin/a2a-go-client")

  # The Python a2a-sdk 1.3.0, server and client (a pip freeze, every
  # package pinned).
  REQ=test/peers/a2a-py/requirements.txt
  if [ -x "$PEERS/a2a-venv/bin/python" ] && cmp -s "$REQ" "$PEERS/a2a-venv/.requirements" 2>/dev/null; then
    log "a2a-sdk (Python) already installed"
  else
    log "installing the Python a2a-sdk into .peers/a2a-venv"
    python3 -m venv "$PEERS/a2a-venv"
    "$PEERS/a2a-venv/bin/pip" install --quiet --disable-pip-version-check -r "$REQ"
    cp "$REQ" "$PEERS/a2a-venv/.requirements"
  fi
  ready+=("$PEERS/a2a-venv/bin/python (a2a-sdk)")

  # The @a2a-js/sdk client and server, with express (npm, pinned by the
  # committed lock file).
  JS_DIR=test/peers/a2a-js
  npm_peers "$JS_DIR" "@a2a-js/sdk and express"
  ready+=("$JS_DIR/node_modules (@a2a-js/sdk, express)")
}

# nginx: the reference hop make bench compares Warden with (grpc_pass and
# proxy_pass); nginx-light where Debian still ships it, else nginx.
install_nginx() {
  if command -v nginx >/dev/null; then
    log "nginx already installed ($(nginx -v 2>&1))"
  else
    log "installing nginx (Debian)"
    apt-get update -qq
    if apt-cache show nginx-light >/dev/null 2>&1; then
      apt-get install -y -qq nginx-light >/dev/null
    else
      apt-get install -y -qq nginx >/dev/null
    fi
  fi
  ready+=("$(command -v nginx)")
}

if want macp; then install_macp; fi
if want mcp; then install_mcp; fi
if want a2a; then install_a2a; fi
if [ "$WHAT" = all ]; then install_nginx; fi
log "ready ($WHAT): ${ready[*]}"
