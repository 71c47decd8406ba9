package mcp

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/agentwarden/warden/rules"
)

// uriCases are resources/read URIs and whether Warden lets a policy judge
// them (true: the spelling URL parsing keeps).
var uriCases = []struct {
	uri  string
	kept bool
	// wary: refused though URL parsing keeps it (userinfo, IPv6 hosts:
	// PolicyURI is conservative there)
	wary bool
}{
	{"demo://vault/secret", true, false},
	{"test://static-binary", true, false},
	{"file:///etc/secret", true, false},
	{"https://example.com/doc", true, false},
	{"https://example.com/doc?q=1#f", true, false},
	{"https://example.com./doc", true, false},
	{"https://127.0.0.1:8443/doc", true, false},
	{"demo://Vault/Secret", true, false}, // an opaque host keeps its case
	{"demo://vault:80/secret", true, false},
	{"demo:vault/./secret", true, false}, // an opaque path is kept as written
	{"urn:isbn:0451450523", true, false},
	{"demo://vault/a%2Fb", true, false},
	{"demo://vault/file.%2e", true, false},
	{"not a uri", false, false},
	{"", true, false},
	{"DEMO://vault/secret", false, false},
	{"Demo://vault/secret", false, false},
	{" demo://vault/secret", false, false},
	{"demo://vault/secret\t", false, false},
	{"de\tmo://vault/secret", false, false},
	{"demo://vault/public/../secret", false, false},
	{"demo://vault/./secret", false, false},
	{"demo://vault/%2e/secret", false, false},
	{"demo://vault/%2E%2E/secret", false, false},
	{"demo://vault/.%2e/secret", false, false},
	{"demo:/vault/../secret", false, false},
	{"demo://vault:/secret", false, false},
	{"demo://vault:080/secret", false, false},
	{"demo://user@vault/secret", false, true},
	{"demo://vault/a b", false, false},
	{"demo://vault/a\u00e9", false, false},
	{"demo://vault/{x}", false, false},
	{"FILE:///etc/secret", false, false},
	{"file:///etc/./secret", false, false},
	{"file:///etc/x/../secret", false, false},
	{`file:\\\etc\secret`, false, false},
	{"file://localhost/etc/secret", false, false},
	{"file:/etc/secret", false, false},
	{"https://EXAMPLE.com/doc", false, false},
	{"https://example.com:443/doc", false, false},
	{"http://example.com:80/doc", false, false},
	{"https://example.com", false, false},
	{"https:example.com/doc", false, false},
	{"https:///example.com/doc", false, false},
	{"https://0x7f.1/doc", false, false},
	{"https://127.1/doc", false, false},
	{"https://0177.0.0.1/doc", false, false},
	{"https://ex%41mple.com/doc", false, false},
	{"https://example.com/doc?it's", false, false},
	{"https://[::1]/doc", false, true},
}

// TestPolicyURI: a URI a server reads in another spelling than it was sent
// is refused before a rule on input.mcp.uri judges it (before: every URI
// reached the policy as sent, and a rule on demo://vault/secret let
// DEMO://vault/secret through to a server that reads it as demo://vault/secret).
func TestPolicyURI(t *testing.T) {
	for _, tc := range uriCases {
		v := PolicyURI(tc.uri)
		if v.OK() != tc.kept {
			t.Errorf("PolicyURI(%q) = %+v, want kept %v", tc.uri, v, tc.kept)
		}
		if !v.OK() && (v.Code != rules.CodeInvalidParams || v.Reason != rules.ReasonMalformedRequest) {
			t.Errorf("PolicyURI(%q) = %+v, want INVALID_PARAMS malformed_request", tc.uri, v)
		}
	}
}

// TestPolicyURIWhatwg holds PolicyURI to the URL parser a server reads URIs
// with (Node's WHATWG URL, as the TypeScript SDK's resources/read does): every
// URI Warden keeps, and every variation built from the cases' pieces, is one
// the parser leaves as it is (or cannot parse); the refused cases are ones it
// changes. Skipped without node.
func TestPolicyURIWhatwg(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	var uris []string
	for _, tc := range uriCases {
		uris = append(uris, tc.uri)
	}
	schemes := []string{"demo:", "DEMO:", "https:", "HTTP:", "file:", "ws:", "urn:"}
	auths := []string{"", "//", "//h", "//H", "//h:", "//h:443", "//h:0443", "//h:80", "//u@h", "//127.0.0.1", "//127.1", "//0x7F.0.0.1", "//h.", "//localhost", "///h"}
	paths := []string{"", "/", "/a", "/a/.", "/a/..", "/./a", "/%2e/a", "/a/%2E%2e", "//a", "/a%2Fb", "/a.b", "/a..b", "a/./b", "/a;b=c", "/~a!$&'()*+,=:@"}
	tails := []string{"", "?", "?q=1", "?q='", "#", "#f", "?q#f"}
	for _, s := range schemes {
		for _, a := range auths {
			for _, p := range paths {
				for _, q := range tails {
					uris = append(uris, s+a+p+q)
				}
			}
		}
	}
	in, _ := json.Marshal(uris)
	cmd := exec.Command(node, "-e", `let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{console.log(JSON.stringify(JSON.parse(d).map(u=>{try{return new URL(u).toString()}catch{return null}})))})`)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var parsed []*string
	if err := json.Unmarshal(out, &parsed); err != nil || len(parsed) != len(uris) {
		t.Fatalf("node answered %d of %d: %v", len(parsed), len(uris), err)
	}
	kept := 0
	for i, u := range uris {
		changed := parsed[i] != nil && *parsed[i] != u
		switch ok := PolicyURI(u).OK(); {
		case ok && changed:
			t.Errorf("kept %q, which the server reads as %q", u, *parsed[i])
		case ok:
			kept++
		case i < len(uriCases) && !uriCases[i].wary && !changed && parsed[i] != nil:
			t.Errorf("refused %q, which the server reads as it is", u)
		}
	}
	t.Logf("%d URIs, %d kept", len(uris), kept)
}
