package listener

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		fileLimit uint64
		want      int
	}{
		{0, 4096},             // unknown
		{1 << 20, 4096},       // a container's usual limit
		{20000, 4096},         // (20000-256)/4 = 4936, capped
		{4096, 960},           // (4096-256)/4
		{1024, 192},           // the classic soft limit
		{256, minConnections}, // nothing left: the floor
	} {
		if got := DefaultMaxConnections(tc.fileLimit); got != tc.want {
			t.Errorf("DefaultMaxConnections(%d) = %d, want %d", tc.fileLimit, got, tc.want)
		}
	}
}

func TestLimits(t *testing.T) {
	d := Limits{}.WithDefaults()
	if d.MaxConnections <= 0 || (FileLimit() > 0 && uint64(d.MaxConnections) >= FileLimit()) {
		t.Errorf("default max_connections %d, file limit %d", d.MaxConnections, FileLimit())
	}
	if d.HeaderTimeout != 10*time.Second || d.BodyTimeout != 60*time.Second || d.IdleTimeout != 75*time.Second ||
		d.GRPCConnectionTimeout != 10*time.Second || d.UpstreamBackoffMax != time.Second || d.UpstreamConnectTimeout != 2*time.Second {
		t.Errorf("defaults: %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	own := Limits{IdleTimeout: time.Second}.Inherit(Limits{IdleTimeout: time.Minute, HeaderTimeout: 3 * time.Second})
	if own.IdleTimeout != time.Second || own.HeaderTimeout != 3*time.Second || own.BodyTimeout != 0 {
		t.Errorf("Inherit: %+v", own)
	}
	for _, tc := range []struct {
		name string
		l    Limits
		want string // "" is valid
	}{
		{"zero", Limits{}, ""},
		{"small", Limits{MaxConnections: 1, HeaderTimeout: time.Millisecond}, ""},
		{"negative cap", Limits{MaxConnections: -1}, "max_connections: negative"},
		{"negative timeout", Limits{BodyTimeout: -time.Second}, "body_timeout: negative"},
		{"negative backoff", Limits{UpstreamBackoffMax: -1}, "upstream_backoff_max: negative"},
		{"cap over the file limit", Limits{MaxConnections: int(min(FileLimit(), 1<<30))}, "not below the file limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "not below the file limit" && FileLimit() == 0 {
				t.Skip("no file limit here")
			}
			err := tc.l.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}
