// Package proxytest holds what the tests of the core and of the protocols'
// deciders share: the dev authenticator, the default policy engine (built
// once per test binary) and operator policies written for a test.
package proxytest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
)

var shared struct {
	once sync.Once
	e    *policies.Engine
	err  error
}

// Engine is the default policy engine, built once.
func Engine(t testing.TB) *policies.Engine {
	shared.once.Do(func() {
		shared.e, shared.err = policies.New(context.Background(), policies.Config{})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.e
}

// DevAuth is an authenticator of the dev method: the bearer token is the
// principal.
func DevAuth(t testing.TB) *authn.Authenticator {
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// WriteRego writes an operator policy named name into a temporary
// directory and returns its path.
func WriteRego(t testing.TB, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Decisions records the decisions an observer is told: with D
// proxy.Decision, a proxy.Observer.
type Decisions[D any] struct {
	mu sync.Mutex
	ds []D
}

// Decided records d.
func (o *Decisions[D]) Decided(d D, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ds = append(o.ds, d)
}

// All returns the decisions recorded so far, oldest first.
func (o *Decisions[D]) All() []D {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ds)
}
