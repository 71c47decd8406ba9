package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// sendPath is the HTTP/2 path of the runtime's Send.
const sendPath = "/macp.v1.MACPRuntimeService/Send"

// frame prefixes a message as gRPC does on the wire (uncompressed).
func frame(b []byte) []byte {
	out := make([]byte, 5+len(b))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(b)))
	copy(out[5:], b)
	return out
}

// sendCheck builds the CheckRequest Envoy's ext_authz filter sends for one
// MACP Send, with with_request_body and pack_as_bytes (the gRPC frame in
// raw_body).
func sendCheck(mode, typ, id, sid, sender string, payload []byte) *authv3.CheckRequest {
	body := frame(marshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{
		MacpVersion: "1.0", Mode: mode, MessageType: typ, MessageId: id, SessionId: sid, Sender: sender, Payload: payload}}))
	headers := map[string]string{":authority": "runtime", ":method": "POST", ":path": sendPath,
		"content-type": "application/grpc", "te": "trailers", "authorization": "Bearer " + sender}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
		Method: "POST", Path: sendPath, Host: "runtime", Protocol: "HTTP/2", Headers: headers, RawBody: body,
	}}}}
}

// authzClient calls an ext_authz server as Envoy does.
type authzClient struct {
	conn *grpc.ClientConn
	rpc  authv3.AuthorizationClient
	// strict checks every decision against the expected one; the null
	// server allows everything, so it is not strict.
	strict bool
}

func dialAuthz(addr string, strict bool) (*authzClient, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &authzClient{conn: conn, rpc: authv3.NewAuthorizationClient(conn), strict: strict}, nil
}

func (c *authzClient) close() { c.conn.Close() }

// check sends one CheckRequest; a decision other than allow (when strict)
// is an error. A refusal with UNAVAILABLE (Warden could not decide: its
// store did not answer in time) is sent again, up to twice, as a client
// told to retry does: one slow Redis read at start-up ended a whole run.
func (c *authzClient) check(ctx context.Context, req *authv3.CheckRequest, allow bool) error {
	var resp *authv3.CheckResponse
	for attempt := 0; ; attempt++ {
		var err error
		resp, err = c.rpc.Check(ctx, req)
		if err != nil {
			return fmt.Errorf("Check: %w", err)
		}
		if resp.GetStatus().GetCode() != int32(code.Code_UNAVAILABLE) || attempt == 2 {
			break
		}
	}
	if got := resp.GetStatus().GetCode() == int32(code.Code_OK); c.strict && got != allow {
		return fmt.Errorf("Check decided allow=%v, want %v: %s", got, allow, resp.GetStatus().GetMessage())
	}
	return nil
}

// checkWork sends Checks of TaskUpdates, updatesPerSession to a session, in
// sessions started through Check (ext_authz commits what it allows): from
// the assignee (allowed) or from the requester (denied FORBIDDEN).
type checkWork struct {
	c        *authzClient
	allow    bool
	sessions []string
	// others are more replicas: message i of the run and step i of a
	// session's setup go to replica i mod (1 + len(others)), so consecutive
	// messages of a session are decided on different replicas.
	others []*authzClient
}

// replica is the client of the i-th message.
func (w *checkWork) replica(i int) *authzClient {
	if n := 1 + len(w.others); i%n != 0 {
		return w.others[i%n-1]
	}
	return w.c
}

func (w *checkWork) setup(ctx context.Context, n int) error {
	w.sessions = make([]string, (n+updatesPerSession-1)/updatesPerSession)
	for i := range w.sessions {
		w.sessions[i] = newSessionID()
	}
	return parallel(ctx, len(w.sessions), func(ctx context.Context, i int) error {
		sid := w.sessions[i]
		for j, r := range []*authv3.CheckRequest{
			sendCheck(taskMode, "SessionStart", "s", sid, "planner", taskStart),
			sendCheck(taskMode, "TaskRequest", "r", sid, "planner", taskRequest),
			sendCheck(taskMode, "TaskAccept", "a", sid, "worker", taskAccept),
		} {
			if err := w.replica(j).check(ctx, r, true); err != nil {
				return err
			}
		}
		return nil
	})
}

func (w *checkWork) do(ctx context.Context, i int) error {
	k := i / updatesPerSession
	if k >= len(w.sessions) {
		return fmt.Errorf("message %d beyond the %d sessions set up", i, len(w.sessions))
	}
	sender := "worker"
	if !w.allow {
		sender = "planner"
	}
	return w.replica(i).check(ctx, sendCheck(taskMode, "TaskUpdate", "u"+strconv.Itoa(i), w.sessions[k], sender, taskUpdate), w.allow)
}

// nullAuthz is the baseline ext_authz server: it allows every request
// without looking at it, so that the comparison isolates Warden's decision
// from the cost of the Check call itself.
type nullAuthz struct {
	authv3.UnimplementedAuthorizationServer
}

// Check implements authv3.AuthorizationServer.
func (nullAuthz) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{}}}, nil
}

// serveNullAuthz runs the null ext_authz server on addr until the process
// is interrupted (the benchmark runs itself with -null-extauthz).
func serveNullAuthz(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("null ext_authz: %w", err)
	}
	srv := grpc.NewServer()
	authv3.RegisterAuthorizationServer(srv, nullAuthz{})
	return srv.Serve(lis)
}
