package macp

// A relayed call's metadata, read off its header list only as far as
// something reads it (relayMD), and the context of the calls made to the
// runtime for it, whose metadata is made only when such a call is made
// (upstreamCtx): a decided Send reads two fields of its metadata (its
// credential and request id) and seldom calls the runtime for its
// decision.

import (
	"context"
	"sync"

	"google.golang.org/grpc/metadata"

	"github.com/agentwarden/warden/authn"
)

// relayMD is a call's metadata as grpc-go gives it to a handler (its
// regular header fields by name, in order), read off its header list:
// names holds each name once, in the order it first came, and vals its
// first value. The map is made when a name repeats or the list is long
// (grpcHeader), else only when something reads the metadata whole (whole).
// A call's metadata is read by one goroutine at a time.
type relayMD struct {
	names, vals []string
	md          metadata.MD
}

// scanNames is how many names grpcHeader checks for repeats by comparing
// them (fewer than this, a client's usual seven or so), rather than in a map.
const scanNames = 16

// Get returns the values of the field name (lower case), as
// metadata.MD's Get (admission.Getter).
func (m *relayMD) Get(name string) []string {
	if m.md != nil {
		return m.md[name]
	}
	for i, n := range m.names {
		if n == name {
			return m.vals[i : i+1 : i+1]
		}
	}
	return nil
}

// whole is the metadata as a map, without the fields handoff owns (which
// a client's copy of never passes: handoff.strip): made on its first use.
func (m *relayMD) whole() metadata.MD {
	if m.md == nil {
		m.md = make(metadata.MD, len(m.names))
		for i, n := range m.names {
			m.md[n] = m.vals[i : i+1 : i+1]
		}
	}
	handoff{}.strip(m.md)
	return m.md
}

// upstreamCtx is the context of the calls made to the runtime for a call
// answered on the relay: its outgoing metadata is upstreamContext's, made
// from the call's metadata when a call to the runtime asks for it
// (connPool, outgoing), once.
type upstreamCtx struct {
	context.Context
	s    *Server
	md   *relayMD
	p    *authn.Principal
	c    *authn.Credentials
	once sync.Once
	out  metadata.MD // upstreamMD's
}

// upstreamKey finds a call's upstreamCtx in a context made from it.
type upstreamKey struct{}

func (u *upstreamCtx) Value(key any) any {
	if key == (upstreamKey{}) {
		return u
	}
	return u.Context.Value(key)
}

// Get returns the credential field name (authn.HeaderAuthorization,
// authn.HeaderMACPToken) as the runtime is sent it for the call, without
// making the metadata: the client's own, or what upstreamMD puts instead
// (both read off Server.tokens).
func (u *upstreamCtx) Get(name string) []string {
	t, replace := u.s.tokens.Upstream(*u.p, *u.c)
	switch {
	case !replace:
		return u.md.Get(name)
	case name == authn.HeaderAuthorization && t != "":
		return []string{"Bearer " + t}
	}
	return nil
}

// outgoing returns ctx with the outgoing metadata of the relayed call it
// was made for when it was made from an upstreamCtx (upstreamMD's, made
// then, once), ctx itself otherwise: every call to the runtime goes
// through it (connPool). Metadata a caller appended to ctx
// (AppendToOutgoingContext) comes after the call's, as it would on
// upstreamContext's context.
func outgoing(ctx context.Context) context.Context {
	u, ok := ctx.Value(upstreamKey{}).(*upstreamCtx)
	if !ok || u == nil {
		return ctx
	}
	u.once.Do(func() { u.out = u.s.upstreamMD(u.md.whole(), *u.p, *u.c) })
	md := u.out
	if added, ok := metadata.FromOutgoingContext(ctx); ok {
		md = metadata.Join(md, added)
	}
	// the upstreamCtx hidden: outgoing on the result is the result
	return metadata.NewOutgoingContext(context.WithValue(ctx, upstreamKey{}, (*upstreamCtx)(nil)), md)
}
