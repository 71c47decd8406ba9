package a2a

import (
	"net/netip"
	"net/url"
	"testing"
)

func TestCheckWebhook(t *testing.T) {
	allow, err := ParseAllow([]string{"203.0.113.0/24", "hooks.internal", "127.0.0.1:9999", "10.9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/a2a", true},
		{"http://93.184.216.34/x", true},
		{"http://[2606:2800:220:1::1]/", true},
		{"http://127.0.0.1/", false},
		{"http://127。0。0。1/", false}, // ideographic full stops
		{"http://①②⑦.0.0.1/", false}, // circled digits: 127.0.0.1 after UTS #46
		{"http://ｌｏｃａｌｈｏｓｔ/", false}, // fullwidth localhost
		{"http://bücher.example/", true},
		{"http://127.1/", false},
		{"http://2130706433/", false},
		{"http://0x7f000001/", false},
		{"http://0x7f.0.0.1/", false},
		{"http://0177.0.0.1/", false},
		{"http://017700000001/", false},
		{"http://127.0.0.1./", false},
		{"http://127.0.0.%31/", false},
		{"http://LOCALHOST/", false},
		{"http://localhost./", false},
		{"http://a.localhost/", false},
		{"http://[::1]/", false},
		{"http://[::ffff:127.0.0.1]/", false},
		{"http://[::ffff:7f00:1]/", false},
		{"http://[::127.0.0.1]/", false},
		{"http://[64:ff9b::a00:1]/", false},
		{"http://[fe80::1%25eth0]/", false},
		{"http://[fc00::1]/", false},
		{"http://10.0.0.1:8080/hook", false},
		{"http://172.16.5.4/", false},
		{"http://192.168.1.1/", false},
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://0.0.0.0/", false},
		{"http://0/", false},
		{"http://100.64.0.1/", false},
		{"http://224.0.0.1/", false},
		{"http://255.255.255.255/", false},
		{"http://user:pw@hooks.example.com/", false},
		{"ftp://hooks.example.com/", false},
		{"/relative", false},
		{"", false},
		// the allowlist
		{"http://203.0.113.9/", true},
		{"http://hooks.internal/", true},
		{"http://127.0.0.1:9999/h", true},
		{"http://127.0.0.1:9998/h", false},
		{"http://10.9.9.9/", true},
		{"http://10.9.9.8/", false},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			err := CheckWebhook(tc.url, allow)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckWebhook(%q) = %v, want ok %v", tc.url, err, tc.ok)
			}
		})
	}
}

func TestParseAllowRefuses(t *testing.T) {
	for _, e := range []string{"", "http://x/", "a b"} {
		if _, err := ParseAllow([]string{e}); err == nil {
			t.Errorf("ParseAllow(%q) accepted", e)
		}
	}
}

// FuzzCheckWebhook: whatever the spelling, a URL whose host any reading
// takes for an internal address is refused.
func FuzzCheckWebhook(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1/", "http://0x7f.1/", "http://[::ffff:10.0.0.1]/", "https://example.com/", "http://2130706433/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckWebhook(s, Allow{}) != nil {
			return
		}
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("accepted %q that does not parse", s)
		}
		if ip, ok := Address(u.Hostname()); ok && internal(ip) != "" {
			t.Fatalf("accepted %q: %s is %s", s, ip, internal(ip))
		}
	})
}

// TestAllowOnly: with Only, a webhook URL must be named by the allowlist,
// and so must the address a delivery dials; without it, CheckDial refuses
// the internal addresses CheckWebhook refuses, in every embedded form.
func TestAllowOnly(t *testing.T) {
	allow, err := ParseAllow([]string{"203.0.113.0/24", "hooks.internal", "127.0.0.1:9999"})
	if err != nil {
		t.Fatal(err)
	}
	only := allow
	only.Only = true
	for _, tc := range []struct {
		url      string
		ok, only bool
	}{
		{"https://hooks.example.com/a2a", true, false},
		{"http://93.184.216.34/x", true, false},
		{"http://hooks.internal/x", true, true},
		{"http://203.0.113.9/", true, true},
		{"http://127.0.0.1:9999/", true, true},
		{"http://127.0.0.1:9998/", false, false},
	} {
		if err := CheckWebhook(tc.url, allow); (err == nil) != tc.ok {
			t.Errorf("CheckWebhook(%s) = %v, want ok %v", tc.url, err, tc.ok)
		}
		if err := CheckWebhook(tc.url, only); (err == nil) != tc.only {
			t.Errorf("CheckWebhook(%s, only) = %v, want ok %v", tc.url, err, tc.only)
		}
	}
	for _, tc := range []struct {
		ip             string
		named, ok, onl bool
	}{
		{"93.184.216.34", false, true, false},
		{"127.0.0.1", false, false, false},
		{"::ffff:127.0.0.1", false, false, false},
		{"::ffff:169.254.169.254", false, false, false},
		{"64:ff9b::a00:1", false, false, false},
		{"fe80::1", false, false, false},
		{"10.1.2.3", false, false, false},
		{"203.0.113.9", false, true, true},
		{"::ffff:203.0.113.9", false, true, true},
		{"127.0.0.1", true, true, true}, // the URL named an allowlisted host
	} {
		ip := netip.MustParseAddr(tc.ip)
		if err := CheckDial(ip, tc.named, allow); (err == nil) != tc.ok {
			t.Errorf("CheckDial(%s, named %v) = %v, want ok %v", tc.ip, tc.named, err, tc.ok)
		}
		if err := CheckDial(ip, tc.named, only); (err == nil) != tc.onl {
			t.Errorf("CheckDial(%s, named %v, only) = %v, want ok %v", tc.ip, tc.named, err, tc.onl)
		}
	}
}
