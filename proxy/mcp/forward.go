package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules/mcp"
)

// target is the upstream URL for a request path: the upstream's endpoint
// when it names one (MCP has a single endpoint), the request's path otherwise;
// never the request's query (the gate refuses a request with one).
func (s *Server) target(r *http.Request) string {
	u := *s.upstream
	if u.Path == "" || u.Path == "/" {
		u.Path, u.RawPath = r.URL.Path, r.URL.RawPath
	}
	u.RawQuery = ""
	return u.String()
}

// newRequest is http.NewRequestWithContext to target(r), without printing
// and parsing the URL again when the upstream names its endpoint (the URL
// is then always the same).
func (s *Server) newRequest(ctx context.Context, r *http.Request, body io.Reader) (*http.Request, error) {
	if s.upstream.Path != "" && s.upstream.Path != "/" {
		return s.endpointURL.Request(ctx, r.Method, body)
	}
	return http.NewRequestWithContext(ctx, r.Method, s.target(r), body)
}

// forward sends the request upstream (with body when not nil) and streams
// the answer back through the exchange. An event stream ends when the
// caller's credential expires.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, x *exchange, body []byte, name string) {
	defer x.unanswered() // no answer seen: nothing to commit
	take := s.streams.Take
	if r.Method == http.MethodGet { // the standing stream (or a resumed one)
		take = s.streams.TakeWatch
	}
	done, busy := take(x.principal)
	if busy != nil {
		relay.Busy(w, busy, x.call.ID)
		return
	}
	defer done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out, err := s.upstreamRequest(ctx, r, x, body, name)
	if err != nil {
		relay.WriteError(w, http.StatusBadGateway, x.call.ID, mcp.ErrInternal, "could not build the upstream request")
		return
	}
	x.sent = true
	resp, err := s.send(out)
	if err != nil {
		x.sent = !relay.Undialed(err)
		if r.Context().Err() == nil {
			s.log.Warn("MCP upstream unavailable", "err", err)
			s.enforcer.UpstreamFailed("mcp")
		}
		relay.WriteError(w, http.StatusBadGateway, x.call.ID, mcp.ErrInternal, "the MCP server is unavailable")
		return
	}
	defer resp.Body.Close()
	if relay.Compressed(w, resp, x.call.ID, "MCP server") {
		s.log.Warn("MCP answer compressed though asked for identity; the caller gets an error", "method", x.call.Method, "content_encoding", resp.Header.Get("Content-Encoding"))
		return
	}
	relay.CopyHeaders(w.Header(), resp.Header)
	if v := resp.Header.Get("Mcp-Session-Id"); v != "" {
		w.Header().Set("Mcp-Session-Id", x.seal(kindSession, v))
	}
	mt := relay.MediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		s.relayEvents(ctx, cancel, w, r, x, resp)
		return
	}
	s.relayBody(w, r, x, resp, mt)
}

// upstreamRequest builds the request toward the upstream: the caller's
// (body when not nil), with the upstream session, the resume point and the
// Mcp-Name header Warden chose, never the caller's own.
func (s *Server) upstreamRequest(ctx context.Context, r *http.Request, x *exchange, body []byte, name string) (*http.Request, error) {
	var rd io.Reader // the body in memory is set after (relay.Body)
	if body == nil {
		rd = r.Body
	}
	out, err := s.newRequest(ctx, r, rd)
	if err != nil {
		return nil, err
	}
	relay.Outbound(out, r, x.strip, credentialHeaders...)
	if body != nil {
		x.body.Set(out, body)
	} else {
		out.ContentLength = r.ContentLength
	}
	out.Header.Del("Mcp-Session-Id")
	if x.sid != "" {
		out.Header.Set("Mcp-Session-Id", x.sid)
	}
	out.Header.Del("Last-Event-Id")
	if x.lastEventID != "" {
		out.Header.Set("Last-Event-Id", x.lastEventID)
	}
	if name != "" {
		out.Header.Set("Mcp-Name", name)
	}
	return out, nil
}

// relayEvents streams an event-stream answer to the caller, each event
// through the exchange. The stream must not outlive the credential it was
// opened with, nor its revocation: cancel ends it.
func (s *Server) relayEvents(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request, x *exchange, resp *http.Response) {
	defer relay.Bound(ctx, cancel, x.expiry, x.guard)()
	hold := s.streams.HoldIn(&x.hold)
	defer hold.Release()
	data := hold.Each(x.fromUpstream)
	if r.Method == http.MethodGet {
		idle := s.streams.Idle(cancel)
		defer idle.Stop()
		data = idle.Each(data)
	}
	err := relay.Stream(w, resp.StatusCode, hold.Reader(resp.Body), relay.Events{Data: data, ID: x.eventID, Max: relay.EventMax(s.cfg.MaxResponseBytes), TooBig: x.tooBig, Readers: &s.sse})
	switch {
	case errors.Is(err, listener.ErrAnswerBudget):
		s.log.Warn("MCP event over the answer bytes in flight; the stream ends with an error", "method", x.call.Method, "principal", x.principal)
		relay.EndWithError(w, x.call.ID, mcp.ErrInternal, s.streams.BudgetBusy().Msg)
	case err == nil || r.Context().Err() != nil:
	case ctx.Err() != nil:
		s.log.Info("MCP event stream closed: the credential expired, or the standing stream passed nothing for streams.watch_idle", "principal", x.principal, "expiry", x.expiry)
	default:
		s.log.Warn("MCP event stream ended early", "method", x.call.Method, "err", err)
	}
}

// relayBody answers the caller with an answer that is not an event stream
// (of media type mt). An error page (text/plain, text/html: no JSON-RPC
// message) passes as it is; application/json, or a successful answer of
// another type that holds JSON a client might still read, is read whole
// and filtered.
func (s *Server) relayBody(w http.ResponseWriter, r *http.Request, x *exchange, resp *http.Response, mt string) {
	if mt != "application/json" && resp.StatusCode/100 != 2 {
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return
	}
	hold := s.streams.HoldIn(&x.hold)
	defer hold.Release()
	buf := s.bufs.Get()
	// Back to the pool once written: what the caller is answered with is
	// the answer read, a part of it or a fresh buffer, and nothing kept
	// past the request holds a slice of it (what is learned from an answer
	// is strings). TestPooledAnswers.
	defer s.bufs.Put(buf)
	b, err := relay.ReadBodyTo(*buf, hold.Reader(resp.Body), s.cfg.MaxResponseBytes)
	*buf = b
	if err != nil {
		s.unreadBody(w, r, x, err)
		return
	}
	status := resp.StatusCode
	if len(bytes.TrimSpace(b)) > 0 && (mt == "application/json" || json.Valid(b)) {
		nb, keep := x.fromUpstream(b)
		if !keep {
			// Never passed unfiltered: an answer to no request of this
			// exchange, or about a task that is not the caller's.
			nb, status = mcp.ErrorBody(x.call.ID, mcp.ErrInternal, "the MCP server's answer could not be matched to the request"), http.StatusBadGateway
		}
		b = nb
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// unreadBody logs why an answer could not be read whole (err) and answers
// the caller with an error in its place (relay.Unread).
func (s *Server) unreadBody(w http.ResponseWriter, r *http.Request, x *exchange, err error) {
	switch {
	case errors.Is(err, listener.ErrAnswerBudget):
		s.log.Warn("MCP answer over the answer bytes in flight; the caller gets an error", "method", x.call.Method, "principal", x.principal)
	case errors.Is(err, relay.ErrBodyTooLarge):
		s.log.Warn("MCP answer over mcp.max_response_bytes; the caller gets an error", "method", x.call.Method, "principal", x.principal,
			"limit", s.cfg.MaxResponseBytes)
	case r.Context().Err() == nil:
		s.log.Warn("MCP answer could not be read whole; the caller gets an error", "method", x.call.Method, "principal", x.principal, "err", err)
	}
	relay.Unread(w, x.call.ID, err, "MCP server", s.responseLimit())
}

// credentialHeaders are the headers a client's credential travels in.
var credentialHeaders = []string{"Authorization", "X-Macp-Token"}

// responseLimit is what a caller reads when an answer is over the bound.
func (s *Server) responseLimit() string {
	return fmt.Sprintf("the MCP server's answer exceeds Warden's limit mcp.max_response_bytes (%d bytes)", s.cfg.MaxResponseBytes)
}

// tooBig answers for an SSE event over mcp.max_response_bytes, given the
// part of it Warden held. Warden cannot check what it did not read, so the
// event never passes: when it is the answer to this exchange's request (no
// method, and its id, when shown, is the request's), the caller gets a
// JSON-RPC error for that id naming the limit, and a later answer to the
// same id is dropped; anything else is dropped. Both are logged.
func (x *exchange) tooBig(prefix []byte) []byte {
	h := scanHead(prefix)
	log := x.s.log.With("method", x.call.Method, "principal", x.principal, "limit", x.s.cfg.MaxResponseBytes)
	answer := !h.hasMethod && !x.answered && x.call.Kind == mcp.KindRequest
	if answer && h.id != nil {
		v, ok := idValue(h.id)
		answer = ok && sameID(v, x.call.ID)
	}
	if !answer {
		log.Warn("MCP event over mcp.max_response_bytes dropped", "message_method", h.method)
		return nil
	}
	log.Warn("MCP answer over mcp.max_response_bytes; the caller gets an error")
	x.answered = true
	x.unknown() // whether it was a result, Warden did not read
	return mcp.ErrorBody(x.call.ID, mcp.ErrInternal, x.s.responseLimit())
}
