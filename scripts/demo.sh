#!/usr/bin/env bash
# make demo: installs what is missing, starts the MACP runtime and Warden in
# front of it on loopback, plays a short story with the MACP Python SDK and
# prints what each agent sent and what Warden decided; stops everything it
# started. Then replays the spec's conformance fixtures and Warden's attack
# transcripts offline. Last, one A2A hijack: the a2a-go v2.3.1 server
# (test/peers/a2a-go) direct and with Warden in front.
#   bash scripts/demo.sh          everything (make demo)
#   bash scripts/demo.sh --a2a    the A2A hijack alone: needs Go, python3 and
#                                 curl, builds no runtime (the README's quick start)
set -euo pipefail
cd "$(dirname "$0")/.."

# refusals prints a few refusals of attack transcripts from a replay output.
# One awk reads the whole file: no pipe into head, whose early exit would
# kill the writer with SIGPIPE (exit 141 under pipefail) once the output
# passes the writer's 4 KiB buffer.
refusals() {
  awk '/ reject / && /forged|hijack|spoof|reoffer|positive_commit/ && n < 8 { print "    " $0; n++ }' "$1"
}
if [ "${1:-}" = --refusals ]; then refusals "$2"; exit; fi # for scripts/demo_test.sh

A2A_ONLY=false
if [ "${1:-}" = --a2a ]; then A2A_ONLY=true; fi
$A2A_ONLY || bash scripts/peers.sh macp # the runtime and the Python SDK: no npm, no MCP peers
make -s build

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
RT=127.0.0.1:$(free_port)
WD=127.0.0.1:$(free_port)
LOGS=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_port() {
  for _ in $(seq 1 150); do
    if python3 -c "import socket,sys; socket.create_connection(('${1%:*}', ${1##*:}), 0.2)" 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  echo "demo: nothing listens on $1; logs in $LOGS" >&2; exit 1
}

if ! $A2A_ONLY; then
MACP_BIND_ADDR=$RT MACP_MEMORY_ONLY=1 MACP_ALLOW_INSECURE=1 RUST_LOG=warn .peers/cargo/bin/macp-runtime >"$LOGS/runtime.log" 2>&1 &
pids+=($!)
wait_port "$RT"
bin/warden serve --macp-listen "$WD" --macp-upstream "$RT" --plaintext --auth dev --insecure-dev-auth >"$LOGS/warden.log" 2>&1 &
pids+=($!)
wait_port "$WD"

echo "== the MACP runtime ($RT) with Warden in front ($WD); agents use the MACP Python SDK"
.peers/venv/bin/python test/peers/macp_driver.py --pretty "$WD" test/peers/demo_story.json
echo
echo "== the same story sent to the runtime directly, for comparison"
.peers/venv/bin/python test/peers/macp_driver.py --pretty "$RT" test/peers/demo_story.json | grep -v '^$' | grep -v '^#'
echo
echo "== Warden's log of refusals: $LOGS/warden.log"
echo
echo "== offline: the spec's conformance fixtures and Warden's attack transcripts (warden replay)"
fixtures=()
for f in testdata/macp/conformance/*.json; do
  if [ -f "test/conformance/$(basename "$f")" ]; then fixtures+=("test/conformance/$(basename "$f")"); else fixtures+=("$f"); fi
done
bin/warden replay "${fixtures[@]}" test/attacks/macp/*.json > "$LOGS/replay.txt"
echo "  $(wc -l < "$LOGS/replay.txt") messages decided, $(grep -c ' reject ' "$LOGS/replay.txt") of them refused; every outcome as the transcripts expect"
echo "  a few refusals:"
refusals "$LOGS/replay.txt"
echo "  full list: $LOGS/replay.txt"

fi

echo
echo "== A2A: the a2a-go v2.3.1 server, direct and with Warden in front; bob tries to read alice's task"
(cd test/peers/a2a-go && go build -trimpath -o "$LOGS/a2a-go-server" .)
A2=127.0.0.1:$(free_port)
WA=127.0.0.1:$(free_port)
printf '[{"token":"tok-alice","sender":"alice"},{"token":"tok-bob","sender":"bob"}]' >"$LOGS/a2a-tokens.json"
"$LOGS/a2a-go-server" -listen "$A2" -tokens alice=tok-alice,bob=tok-bob >"$LOGS/a2a-go.log" 2>&1 &
pids+=($!)
wait_port "$A2"
bin/warden serve --a2a-listen "$WA" --a2a-upstream "http://$A2/jsonrpc" --plaintext --auth static --static-tokens "$LOGS/a2a-tokens.json" >"$LOGS/warden-a2a.log" 2>&1 &
pids+=($!)
wait_port "$WA"
# rpc TOKEN URL METHOD PARAMS: one JSON-RPC call, its answer on one line.
rpc() {
  curl -s "$2" -H "Authorization: Bearer $1" -H 'Content-Type: application/json' \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$3\",\"params\":$4}"
}
task_id() { python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])'; }
# show: an error as it came; a task as its state and alice's words in it.
show() {
  python3 -c 'import json,sys
a = json.load(sys.stdin)
if "error" in a: print("error", json.dumps(a["error"])[:110])
else:
  t = a["result"]; words = [p.get("text") for m in t.get("history", []) for p in m.get("parts", [])]
  print("the task,", t["status"]["state"] + ", with alice'"'"'s words", words)'
}
msg='{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"input alice-private-note"}]}}'
for where in direct warden; do
  if [ $where = direct ]; then url=http://$A2/jsonrpc; else url=http://$WA/jsonrpc; fi
  id=$(rpc tok-alice "$url" SendMessage "$msg" | task_id)
  echo "  $where: alice's task $id"
  echo "  $where: bob GetTask on it  -> $(rpc tok-bob "$url" GetTask "{\"id\":\"$id\"}" | show)"
  echo "  $where: bob GetTask made-up -> $(rpc tok-bob "$url" GetTask '{"id":"0193a6f0-0000-7000-8000-000000000000"}' | show)"
done
echo "  (direct, a2a-go hands alice's task to bob; through Warden he gets the made-up id's answer: ids are sealed to their owner)"
