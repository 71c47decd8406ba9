package a2a

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestCardGolden: a card in a2a-go v2.3.1's shape (with 0.3's url and
// additionalInterfaces) rewritten for a public endpoint: every JSON-RPC
// interface, whatever host or spelling it names (the server as localhost, a
// mirror), points at Warden, one per protocol version; other bindings and
// interfaces routed by tenant are gone; every other member stays, text
// unescaped.
func TestCardGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "card.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{HTTPConfig: listener.HTTPConfig{Upstream: "http://127.0.0.1:9100/jsonrpc"}}, newEnforcer(t), testKey, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	d := json.NewDecoder(bytes.NewReader(in))
	d.UseNumber()
	if err := d.Decode(&c); err != nil {
		t.Fatal(err)
	}
	s.rewriteCard(c, "https://agent.example/jsonrpc")
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // as encode writes it
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	got := bytes.TrimSuffix(out.Bytes(), []byte("\n"))
	golden := filepath.Join("testdata", "card.golden")
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(got, '\n'), want) {
		t.Errorf("rewritten card differs from %s (go test -run TestCardGolden -update):\n%s", golden, got)
	}
	if b, _ := jsonrpc.Encode(c); bytes.Contains(b, []byte(`\u0026`)) {
		t.Errorf("encode escapes HTML: %s", b)
	}
}
