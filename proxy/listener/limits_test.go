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
	for _, tc := range []struct {
		max, perSource, unauth, unauthPerSource int
	}{
		{4096, 1024, 1024, 64},
		{64, 32, 16, 16},
		{16, 16, 8, 8},
		{4, 4, 4, 4},
	} {
		d := Limits{MaxConnections: tc.max}.WithDefaults()
		if d.MaxConnectionsPerSource != tc.perSource || d.MaxUnauthenticated != tc.unauth || d.MaxUnauthenticatedPerSource != tc.unauthPerSource || d.AuthTimeout != 10*time.Second {
			t.Errorf("max_connections %d: per source %d, unauthenticated %d, per source %d, auth timeout %v; want %d, %d, %d, 10s",
				tc.max, d.MaxConnectionsPerSource, d.MaxUnauthenticated, d.MaxUnauthenticatedPerSource, d.AuthTimeout, tc.perSource, tc.unauth, tc.unauthPerSource)
		}
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
		{"negative auth timeout", Limits{AuthTimeout: -1}, "auth_timeout: negative"},
		{"negative per source", Limits{MaxConnectionsPerSource: -1}, "max_connections_per_source: negative"},
		{"negative unauthenticated", Limits{MaxUnauthenticated: -1}, "max_unauthenticated: negative"},
		{"per source over the cap", Limits{MaxConnections: 64, MaxConnectionsPerSource: 65}, "max_connections_per_source: 65 is above max_connections (64)"},
		{"unauthenticated over the cap", Limits{MaxConnections: 64, MaxUnauthenticated: 65}, "max_unauthenticated: 65 is above"},
		{"unauthenticated per source over its share", Limits{MaxConnections: 64, MaxUnauthenticated: 8, MaxUnauthenticatedPerSource: 9}, "max_unauthenticated_per_source: 9 is above"},
		{"shares within the cap", Limits{MaxConnections: 64, MaxConnectionsPerSource: 64, MaxUnauthenticated: 64, MaxUnauthenticatedPerSource: 64}, ""},
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
