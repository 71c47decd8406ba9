package tasks

import (
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/proxytest"
)

func engine(t testing.TB) *policies.Engine      { return proxytest.Engine(t) }
func devAuth(t testing.TB) *authn.Authenticator { return proxytest.DevAuth(t) }

func writeRego(t *testing.T, name, src string) string { return proxytest.WriteRego(t, name, src) }

// newDecider is the MCP decider on an Enforcer of its own, configured with
// cfg and, when given, with set on its options.
func newDecider(t testing.TB, cfg proxy.Config, set ...func(*proxy.Options)) *Decider {
	t.Helper()
	opts := proxy.Options{Authenticator: devAuth(t), Policies: engine(t)}
	for _, f := range set {
		f(&opts)
	}
	e, err := proxy.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return New(e)
}

// replicas are n deciders on Enforcers sharing the owner store store (nil:
// none).
func replicas(t testing.TB, n int, store proxy.TaskStore) []*Decider {
	t.Helper()
	var ds []*Decider
	for range n {
		ds = append(ds, newDecider(t, proxy.Config{}, func(o *proxy.Options) {
			if store != nil {
				o.Tasks = store
			}
		}))
	}
	return ds
}
