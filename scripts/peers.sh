#!/usr/bin/env bash
# Installs the real MACP peers the black-box tests drive, at pinned versions,
# into the git-ignored .peers/ folder: the MACP reference runtime (crates.io)
# and the MACP Python SDK (PyPI, in a virtualenv). A second run finds them and
# skips the work.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNTIME_VERSION=0.13.0
PEERS=$PWD/.peers

log() { echo "peers: $*" >&2; }
mkdir -p "$PEERS"

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
log "ready: $PEERS/cargo/bin/macp-runtime, $PEERS/venv/bin/python"
