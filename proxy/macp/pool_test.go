package macp

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestConnPool holds more streams open than one connection of the server
// takes (2): the pool spreads them over more connections, so every stream
// and a unary call beside them get through, and slots come back when the
// streams end.
func TestConnPool(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// every call is a stream that answers each message until the client ends
	echo := func(_ any, ss grpc.ServerStream) error {
		for {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if err := ss.SendMsg(&f); err != nil {
				return err
			}
		}
	}
	srv := grpc.NewServer(grpc.MaxConcurrentStreams(2), grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(echo))
	go srv.Serve(lis)
	defer srv.Stop()
	dials := 0
	p, err := newConnPool(func() (*grpc.ClientConn, error) {
		dials++
		return grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	}, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	var streams []grpc.ClientStream
	for i := range 7 {
		cs, err := p.NewStream(ctx, desc, "/x.Y/Z")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(&frame{b: []byte("hi")}); err != nil {
			t.Fatal(err)
		}
		var f frame
		if err := cs.RecvMsg(&f); err != nil || string(f.b) != "hi" {
			t.Fatalf("stream %d: %q %v", i, f.b, err)
		}
		streams = append(streams, cs)
	}
	if dials != 4 {
		t.Errorf("7 streams at 2 a connection: %d connections, want 4", dials)
	}
	// the last connection has room for one more call
	var f frame
	if err := p.Invoke(ctx, "/x.Y/Z", &frame{b: []byte("unary")}, &f); err != nil || string(f.b) != "unary" {
		t.Fatalf("unary call beside the streams: %q %v", f.b, err)
	}
	// with every slot taken, a call is refused at once, not queued
	cs, err := p.NewStream(ctx, desc, "/x.Y/Z")
	if err != nil {
		t.Fatal(err)
	}
	streams = append(streams, cs)
	began := time.Now()
	if err := p.Invoke(ctx, "/x.Y/Z", &frame{b: []byte("unary")}, &f); status.Code(err) != codes.ResourceExhausted || time.Since(began) > time.Second {
		t.Errorf("a call with every slot taken: %v after %v, want RESOURCE_EXHAUSTED at once", err, time.Since(began))
	}
	if _, err := p.NewStream(ctx, desc, "/x.Y/Z"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a stream with every slot taken: %v, want RESOURCE_EXHAUSTED", err)
	}
	for _, cs := range streams {
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(&f); !errors.Is(err, io.EOF) {
			t.Fatalf("after CloseSend: %v", err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.conns {
		if c.active != 0 {
			t.Errorf("connection %d: %d calls still counted after every call ended", i, c.active)
		}
	}
}
