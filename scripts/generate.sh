#!/usr/bin/env bash
# Regenerates the Go code for the MACP protobuf schemas in wire/proto.
#
#   bash scripts/generate.sh      (from the repository root; `make generate`)
#
# Installs what is missing (idempotent: pinned generators go to .tools/bin and
# are reinstalled only when absent or at another version; protoc comes from
# Debian's protobuf-compiler), then writes
#   wire/macp/v1/*.pb.go                 (package macp.v1, incl. the gRPC service)
#   wire/modes/<mode>/v1/*.pb.go         (macp.modes.<mode>.v1; multi_round -> multiround)
# Output paths follow each file's go_package (protoc `module=` mode), so the
# generated tree mirrors the Go import paths.
set -euo pipefail

PROTOC_GEN_GO_VERSION="v1.36.12"
PROTOC_GEN_GO_GRPC_VERSION="v1.6.2"
# The checked-in code was generated with this protoc; the version is written
# into each file's header, so another protoc only changes that comment.
EXPECTED_PROTOC_VERSION="3.21.12"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MODULE="$(go list -m)"
TOOLS_BIN="$ROOT/.tools/bin"
mkdir -p "$TOOLS_BIN"

log() { printf 'generate: %s\n' "$*" >&2; }

# --- protoc -----------------------------------------------------------------
if ! command -v protoc >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1; then
		SUDO=""
		if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
		log "installing protoc (Debian protobuf-compiler)"
		$SUDO apt-get update -qq
		$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null
	else
		log "protoc not found; install protobuf-compiler (protoc ${EXPECTED_PROTOC_VERSION}) and retry"
		exit 1
	fi
fi
PROTOC_VERSION="$(protoc --version | awk '{print $2}')"
if [ "$PROTOC_VERSION" != "$EXPECTED_PROTOC_VERSION" ]; then
	log "warning: protoc ${PROTOC_VERSION} (checked-in code used ${EXPECTED_PROTOC_VERSION}); only the header comment should differ"
fi

# --- Go plugins -------------------------------------------------------------
# install_plugin BINARY PACKAGE VERSION: go install PACKAGE@VERSION into
# .tools/bin unless BINARY there already reports VERSION.
install_plugin() {
	local bin="$1" pkg="$2" want="$3" have=""
	if [ -x "$TOOLS_BIN/$bin" ]; then
		# "protoc-gen-go v1.36.12" / "protoc-gen-go-grpc 1.6.2"
		have="$("$TOOLS_BIN/$bin" --version 2>/dev/null | awk '{print $NF}')"
		have="v${have#v}"
	fi
	if [ "$have" = "$want" ]; then
		return
	fi
	log "installing ${pkg}@${want}"
	GOBIN="$TOOLS_BIN" go install "${pkg}@${want}"
}
install_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

# --- generate ---------------------------------------------------------------
PROTO_DIR="wire/proto"
mapfile -t PROTOS < <(cd "$PROTO_DIR" && find . -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)
if [ "${#PROTOS[@]}" -eq 0 ]; then
	log "no .proto files under $PROTO_DIR"
	exit 1
fi

# Drop previously generated files so renamed or deleted protos leave nothing stale.
find wire/macp wire/modes -name '*.pb.go' -type f -delete 2>/dev/null || true

protoc \
	--proto_path="$PROTO_DIR" \
	--plugin=protoc-gen-go="$TOOLS_BIN/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$TOOLS_BIN/protoc-gen-go-grpc" \
	--go_out=. --go_opt=module="$MODULE" \
	--go-grpc_out=. --go-grpc_opt=module="$MODULE" \
	"${PROTOS[@]}"

log "generated $(find wire/macp wire/modes -name '*.pb.go' | wc -l) files from ${#PROTOS[@]} protos (protoc ${PROTOC_VERSION}, protoc-gen-go ${PROTOC_GEN_GO_VERSION}, protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION})"
