package test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/rules/mcp"
)

// ladderScript runs the official MCP Python SDK's (2.3.0) request ladder,
// for each row read from stdin (a JSON array of {"method", "key", "value",
// "header": the Mcp-Name header's bytes, hex}), on a body naming value
// under key and that Mcp-Name header as Starlette hands them to it:
// "accepted" or "rejected", a JSON string a line.
const ladderScript = `import json, sys
from starlette.datastructures import Headers
from mcp.shared import inbound
version = inbound.MODERN_PROTOCOL_VERSIONS[-1]
for row in json.load(sys.stdin):
    method = row["method"]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {row["key"]: row["value"], "_meta": {inbound.PROTOCOL_VERSION_META_KEY: version, inbound.CLIENT_CAPABILITIES_META_KEY: {}}}}
    h = Headers(raw=[(b"mcp-protocol-version", version.encode()), (b"mcp-method", method.encode()), (b"mcp-name", bytes.fromhex(row["header"]))])
    r = inbound.classify_inbound_request(body, headers=h)
    print(json.dumps("rejected" if isinstance(r, inbound.InboundLadderRejection) else "accepted"))
`

// TestMCPNameHeaderReadAlike: an Mcp-Name header Warden compared with the
// body in its own reading, while the MCP Python SDK's server (Starlette
// decodes header bytes as Latin-1; a =?base64?...?= that does not decode is
// no value) reads another value: raw UTF-8 bytes equal to the body's name,
// a sentinel that does not decode equal to the body's. Warden forwarded
// both as matching (L2 in docs/security.md); now it refuses what the SDK
// reads otherwise, and still passes what both read alike.
func TestMCPNameHeaderReadAlike(t *testing.T) {
	py := peer(t, ".peers/mcp-venv/bin/python")
	rows := []struct {
		name, method, key, value, header string
		alike                            bool
	}{
		{"plain ASCII", mcp.MethodToolsCall, "name", "echo", "echo", true},
		{"base64 form of a non-ASCII name", mcp.MethodToolsCall, "name", "écho", "=?base64?w6ljaG8=?=", true},
		{"raw UTF-8 name", mcp.MethodToolsCall, "name", "écho", "écho", false},
		{"raw UTF-8 URI", mcp.MethodResourcesRead, "uri", "demo://vault/café", "demo://vault/café", false},
		{"sentinel that does not decode", mcp.MethodPromptsGet, "name", "=?base64?!!?=", "=?base64?!!?=", false},
	}
	in := make([]map[string]string, len(rows))
	for i, tc := range rows {
		in[i] = map[string]string{"method": tc.method, "key": tc.key, "value": tc.value, "header": hex.EncodeToString([]byte(tc.header))}
	}
	verdicts := pythonVerdicts(t, py, ladderScript, in)
	for i, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := verdicts[i], map[bool]string{true: "accepted", false: "rejected"}[tc.alike]; got != want {
				t.Fatalf("the Python SDK %s Mcp-Name %q for %q, want %s", got, tc.header, tc.value, want)
			}
			params, _ := json.Marshal(map[string]string{tc.key: tc.value})
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": tc.method, "params": json.RawMessage(params)})
			c, err := mcp.Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			v := mcp.CheckHeaders(c, mcp.Headers{ProtocolVersion: mcp.Era2026, Method: tc.method, Name: tc.header, HasName: true})
			if v.OK() != tc.alike {
				t.Fatalf("Warden's verdict on Mcp-Name %q for %q: %+v (the Python SDK reads them alike: %v)", tc.header, tc.value, v, tc.alike)
			}
		})
	}
}

// paramScript runs the MCP Python SDK's (2.3.0) Mcp-Param-* check on a
// tool mirroring region in Mcp-Param-Region, for each row read from stdin
// (a JSON array of {"region": the argument value, "lines": the header's
// field lines, hex}) as Starlette hands them to it: "accepted" or
// "rejected", a JSON string a line.
const paramScript = `import json, sys
from starlette.datastructures import Headers
from mcp.shared import inbound
schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
for row in json.load(sys.stdin):
    h = Headers(raw=[(b"mcp-param-region", bytes.fromhex(x)) for x in row["lines"]])
    r = inbound.validate_mcp_param_headers(schema, {"region": row["region"]}, h)
    print(json.dumps("rejected" if r is not None else "accepted"))
`

// TestMCPParamLinesReadAlike: the sidecar reads Mcp-Param-* field lines as
// the MCP Python SDK's server does (each line one value, the header given
// on two lines refused): one line "Paris, France" is the argument "Paris,
// France" to both. Before, Warden refused it (a comma counted as a second
// line on every door), where the SDK ran the tool.
func TestMCPParamLinesReadAlike(t *testing.T) {
	py := peer(t, ".peers/mcp-venv/bin/python")
	schema := mcp.MirroredArguments([]byte(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`))
	rows := []struct {
		name, region string
		lines        []string
		alike        bool // both accept
	}{
		{"one line holding a comma", "Paris, France", []string{"Paris, France"}, true},
		{"base64", "Paris, France", []string{"=?base64?UGFyaXMsIEZyYW5jZQ==?="}, true},
		{"two lines", "Paris", []string{"Paris", "France"}, false},
		{"two lines, the argument joined", "Paris, France", []string{"Paris", "France"}, false},
	}
	type pyRow struct {
		Region string   `json:"region"`
		Lines  []string `json:"lines"` // hex
	}
	in := make([]pyRow, len(rows))
	for i, tc := range rows {
		in[i].Region = tc.region
		for _, l := range tc.lines {
			in[i].Lines = append(in[i].Lines, hex.EncodeToString([]byte(l)))
		}
	}
	verdicts := pythonVerdicts(t, py, paramScript, in)
	for i, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := verdicts[i], map[bool]string{true: "accepted", false: "rejected"}[tc.alike]; got != want {
				t.Fatalf("the Python SDK %s Mcp-Param-Region %q for %q, want %s", got, tc.lines, tc.region, want)
			}
			args, _ := json.Marshal(map[string]string{"region": tc.region})
			c, err := mcp.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":` + string(args) + `}}`))
			if err != nil {
				t.Fatal(err)
			}
			ps := []mcp.Param{{Name: "Region", Values: tc.lines}} // the sidecar's lines (net/http)
			v := mcp.CheckHeaders(c, mcp.Headers{ProtocolVersion: mcp.Era2026, Params: ps})
			if v.OK() {
				v = mcp.CheckParams(c, ps, schema, mcp.Era2026)
			}
			if v.OK() != tc.alike {
				t.Fatalf("the sidecar's verdict on Mcp-Param-Region %q for %q: %+v (the Python SDK accepts it: %v)", tc.lines, tc.region, v, tc.alike)
			}
		})
	}
}

// pythonVerdicts runs script in one Python process with rows as a JSON
// array on its stdin and returns the verdicts it prints, one JSON string a
// line, one a row: one process for a table (starting the SDK took seconds a
// row on a loaded machine).
func pythonVerdicts[R any](t *testing.T, py, script string, rows []R) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s%s", err, out, stderr.Bytes())
	}
	var verdicts []string
	for line := range strings.Lines(string(out)) {
		var v string
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("python: line %q: %v\n%s", line, err, stderr.Bytes())
		}
		verdicts = append(verdicts, v)
	}
	if len(verdicts) != len(rows) {
		t.Fatalf("python: %d verdicts for %d rows:\n%s%s", len(verdicts), len(rows), out, stderr.Bytes())
	}
	return verdicts
}
