package a2a

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

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
	c, err := jsonrpc.ReadObject(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := rewriteCard(c, "https://agent.example/jsonrpc"); err != nil || c.Err() != nil {
		t.Fatal(err, c.Err())
	}
	// The golden file is the card as decoding, rewriting and encoding
	// wrote it: the spliced card reads the same.
	b := c.AppendTo(nil)
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // as encode writes it
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
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
	if bytes.Contains(b, []byte(`\u0026`)) {
		t.Errorf("encode escapes HTML: %s", b)
	}
}
