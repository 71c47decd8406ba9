package authn

import (
	"context"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testjwt"
)

func BenchmarkAuthenticate(b *testing.B) {
	k := keysOnce()
	now := time.Now()
	ctx := context.Background()

	jwtCfg := jwtConfig()
	jwtCfg.JWT.JWKSFile = writeFile(b, "jwks.json", testjwt.JWKS(b, k.rsa, k.ec, k.ed))
	staticCfg := Config{Mode: Methods{MethodStatic}, Static: StaticConfig{TokensFile: writeFile(b, "tokens.json", []byte(tokensJSON))}}
	devCfg := Config{Mode: Methods{MethodDev}, Insecure: true}

	benches := []struct {
		name  string
		cfg   Config
		creds Credentials
	}{
		{name: "jwt-cache-hit-RS256", cfg: jwtCfg, creds: Credentials{Bearer: testjwt.Sign(b, k.rsa, k.rsa.KID, claimsAt(now, "agent-a"))}},
		{name: "jwt-cache-hit-ES256", cfg: jwtCfg, creds: Credentials{Bearer: testjwt.Sign(b, k.ec, k.ec.KID, claimsAt(now, "agent-a"))}},
		{name: "static", cfg: staticCfg, creds: Credentials{Bearer: "tok-a"}},
		{name: "dev", cfg: devCfg, creds: Credentials{Bearer: "planner"}},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			a, err := New(bb.cfg, Options{Logger: discardLogger()})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := a.Authenticate(ctx, bb.creds); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Authenticate(ctx, bb.creds); err != nil {
					b.Fatal(err)
				}
			}
		})
	}

	// For scale: the cost the cache saves, a full RS256 verification.
	b.Run("jwt-verify-RS256-uncached", func(b *testing.B) {
		cfg := jwtCfg
		cfg.JWT.CacheSize = 1
		a, err := New(cfg, Options{Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		toks := []string{
			testjwt.Sign(b, k.rsa, k.rsa.KID, claimsAt(now, "agent-a")),
			testjwt.Sign(b, k.rsa, k.rsa.KID, claimsAt(now, "agent-b")),
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if _, err := a.Authenticate(ctx, Credentials{Bearer: toks[i%2]}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
