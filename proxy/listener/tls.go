package listener

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwarden/warden/authn"
)

// DefaultTLSReloadInterval is how often a listener's TLS files are read
// again to notice a change (Limits.TLSReloadInterval).
const DefaultTLSReloadInterval = 10 * time.Second

// TLS is a listener's TLS material: its certificate and key and, when a
// client CA bundle is named, the CAs that verify client certificates (a
// certificate is verified if given but not required, so bearer credentials
// keep working beside mTLS). It is read from its files by NewTLS and again
// by Reload (on SIGHUP) and Watch (when a file changes); every new
// handshake uses the newest material read. The connections of a listener
// wrapped by Track whose client chain no longer verifies against a reloaded
// bundle are closed, which ends every stream they carry (gRPC, SSE): a CA
// removed from the bundle stops admitting at once, not at the client's next
// reconnect.
type TLS struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger
	// reloaded, when set, is told of every Reload that replaced the
	// material (nil) or failed (its error).
	reloaded func(error)

	cur atomic.Pointer[tlsMaterial]

	reload sync.Mutex // one Reload at a time

	mu    sync.Mutex
	conns map[*trustConn]struct{}
}

// tlsMaterial is one reading of the files.
type tlsMaterial struct {
	cert   tls.Certificate
	pool   *x509.CertPool // nil without a client CA file
	cas    authn.ClientCAs
	digest [sha256.Size]byte
}

// NewTLS reads a listener's TLS files; caFile may be empty (no mTLS).
func NewTLS(certFile, keyFile, caFile string, log *slog.Logger) (*TLS, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &TLS{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log, conns: map[*trustConn]struct{}{}}
	m, err := t.read()
	if err != nil {
		return nil, err
	}
	t.cur.Store(m)
	return t, nil
}

// read loads the files, each read once.
func (t *TLS) read() (*tlsMaterial, error) {
	h := sha256.New()
	var raw [3][]byte
	for i, f := range []string{t.certFile, t.keyFile, t.caFile} {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		fmt.Fprintf(h, "%d:%d:", i, len(b))
		h.Write(b)
		raw[i] = b
	}
	m := &tlsMaterial{}
	h.Sum(m.digest[:0])
	var err error
	if m.cert, err = tls.X509KeyPair(raw[0], raw[1]); err != nil {
		return nil, fmt.Errorf("load certificate %s: %w", t.certFile, err)
	}
	if t.caFile != "" {
		if m.pool, m.cas = authn.ReadCAs(raw[2]); len(m.cas) == 0 {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", t.caFile)
		}
	}
	return m, nil
}

// ClientCAs returns the CAs the listener verifies client certificates with
// now (the client CA file as last read); nil without one, or for no TLS (a
// nil t).
func (t *TLS) ClientCAs() authn.ClientCAs {
	if t == nil {
		return nil
	}
	return t.cur.Load().cas
}

// Config returns the server configuration a listener serves with, offering
// nextProtos by ALPN (none for gRPC, which sets its own). Each handshake
// takes the newest material (GetConfigForClient).
func (t *TLS) Config(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			return t.forConn(hello.Conn, nextProtos), nil
		},
	}
}

// forConn is the configuration of one handshake on conn: the current
// material and, on a tracked connection, a record of the client's chain.
func (t *TLS) forConn(conn net.Conn, nextProtos []string) *tls.Config {
	m := t.cur.Load()
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos, Certificates: []tls.Certificate{m.cert}}
	if m.pool != nil {
		c.ClientCAs, c.ClientAuth = m.pool, tls.VerifyClientCertIfGiven
		if tc, ok := conn.(*trustConn); ok && tc.owner == t {
			c.VerifyConnection = func(cs tls.ConnectionState) error {
				tc.chain.Store(&cs.PeerCertificates)
				return nil
			}
		}
	}
	return c
}

// Track returns lis with each accepted connection registered, so that
// Reload can close those whose client chain no longer verifies. The
// handshake must run on the connection Accept returns (tls.NewListener over
// it, or gRPC's transport credentials).
func (t *TLS) Track(lis net.Listener) net.Listener { return &trustListener{Listener: lis, owner: t} }

// Reload reads the files again. When they changed it installs the new
// material for new handshakes and closes the tracked connections whose
// client chain does not verify against the new bundle. On an error (a file
// missing or half-written, a key that does not match) the current material
// stays.
func (t *TLS) Reload() error {
	t.reload.Lock()
	defer t.reload.Unlock()
	m, err := t.read()
	if err != nil {
		err = fmt.Errorf("tls reload: %w", err)
		t.observe(err)
		return err
	}
	if m.digest == t.cur.Load().digest {
		return nil
	}
	t.cur.Store(m)
	t.observe(nil)
	closed := t.evict(m.pool)
	t.log.Info("tls: certificate and client CAs reloaded", "cert_file", t.certFile, "client_ca_file", t.caFile, "connections_closed", closed)
	return nil
}

// OnReload has fn told of every reload that replaced the material (nil)
// or failed (its error), for the reload metric; a reload that found the
// files unchanged is not told. Call it before the listener serves.
func (t *TLS) OnReload(fn func(error)) { t.reloaded = fn }

func (t *TLS) observe(err error) {
	if t.reloaded != nil {
		t.reloaded(err)
	}
}

// Watch calls Reload every interval until ctx ends, logging its errors.
func (t *TLS) Watch(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultTLSReloadInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := t.Reload(); err != nil {
			t.log.Warn("tls: keeping the current certificate and client CAs", "error", err.Error())
		}
	}
}

// evict closes the tracked connections whose client chain does not verify
// against pool and returns how many.
func (t *TLS) evict(pool *x509.CertPool) int {
	t.mu.Lock()
	var stale []*trustConn
	for c := range t.conns {
		p := c.chain.Load()
		if p == nil || len(*p) == 0 {
			continue
		}
		if pool == nil || !verifies(*p, pool) {
			stale = append(stale, c)
		}
	}
	t.mu.Unlock()
	for _, c := range stale {
		_ = c.Close()
	}
	return len(stale)
}

// verifies reports whether chain (leaf first, as the client sent it) is a
// client certificate that pool verifies now.
func verifies(chain []*x509.Certificate, pool *x509.CertPool) bool {
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

type trustListener struct {
	net.Listener
	owner *TLS
}

func (l *trustListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trustConn{Conn: c, owner: l.owner}
	l.owner.mu.Lock()
	l.owner.conns[tc] = struct{}{}
	l.owner.mu.Unlock()
	return tc, nil
}

// trustConn is a tracked connection: the client chain its handshake
// verified, nil before or without one.
type trustConn struct {
	net.Conn
	owner *TLS
	chain atomic.Pointer[[]*x509.Certificate]
	once  sync.Once
}

func (c *trustConn) Close() error {
	c.once.Do(func() {
		c.owner.mu.Lock()
		delete(c.owner.conns, c)
		c.owner.mu.Unlock()
	})
	return c.Conn.Close()
}

// CertPool reads a PEM bundle of CA certificates.
func CertPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}
