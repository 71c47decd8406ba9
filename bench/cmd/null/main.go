// Command null is the null Go pass-through `make bench` compares Warden
// with: the same hop built from the stock Go stacks, doing no enforcement.
// With -macp it is a grpc-go server that relays every call, as raw frames,
// to the runtime over one client connection; with -mcp it is an
// httputil.ReverseProxy that flushes every write. With -macp and -relay it
// is the HTTP/2 frame relay of proxy/frames instead of grpc-go. With -pprof
// it also serves net/http/pprof on a listener of its own (off by default),
// so that `make bench` can profile it the way it profiles Warden.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentwarden/warden/proxy/frames"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "null:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	macpUp := flag.String("macp", "", "relay gRPC to this runtime address (host:port)")
	mcpUp := flag.String("mcp", "", "reverse-proxy HTTP to this URL")
	frameRelay := flag.Bool("relay", false, "with -macp: relay HTTP/2 frames (proxy/frames) instead of grpc-go calls")
	pprofAddr := flag.String("pprof", "", "also serve net/http/pprof on this address (host:port); off by default")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *pprofAddr != "" {
		if err := servePprof(ctx, *pprofAddr); err != nil {
			return err
		}
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	switch {
	case *macpUp != "" && *frameRelay:
		r, err := frames.New(frames.Config{Upstream: *macpUp})
		if err != nil {
			return err
		}
		return r.Serve(ctx, lis)
	case *macpUp != "":
		return serveGRPC(ctx, lis, *macpUp)
	case *mcpUp != "":
		return serveHTTP(ctx, lis, *mcpUp)
	}
	return errors.New("one of -macp and -mcp is required")
}

// frame is one gRPC message, relayed as the peer sent it.
type frame struct{ b []byte }

// rawCodec moves frames without decoding them.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return f.b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

// serveGRPC relays every call on lis to upstream.
func serveGRPC(ctx context.Context, lis net.Listener, upstream string) error {
	conn, err := grpc.NewClient(upstream, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return err
	}
	defer conn.Close()
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	relay := func(_ any, in grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(in)
		md, _ := metadata.FromIncomingContext(in.Context())
		md = md.Copy()
		delete(md, ":authority")
		octx, cancel := context.WithCancel(metadata.NewOutgoingContext(in.Context(), md))
		defer cancel()
		out, err := conn.NewStream(octx, desc, method)
		if err != nil {
			return err
		}
		up := make(chan error, 1)
		go func() {
			for {
				var f frame
				if err := in.RecvMsg(&f); err != nil {
					if errors.Is(err, io.EOF) {
						up <- out.CloseSend()
					} else {
						up <- err
					}
					return
				}
				if err := out.SendMsg(&f); err != nil {
					up <- err
					return
				}
			}
		}()
		if hdr, err := out.Header(); err == nil {
			if err := in.SendHeader(hdr); err != nil {
				return err
			}
		}
		for {
			var f frame
			if err := out.RecvMsg(&f); err != nil {
				in.SetTrailer(out.Trailer())
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if err := in.SendMsg(&f); err != nil {
				return err
			}
		}
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(relay))
	go func() { <-ctx.Done(); srv.Stop() }()
	return srv.Serve(lis)
}

// serveHTTP reverse-proxies every request on lis to upstream.
func serveHTTP(ctx context.Context, lis net.Listener, upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil {
		return err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		FlushInterval: -1,
		Transport:     &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute},
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// servePprof serves net/http/pprof's CPU profile (and index) on addr until
// ctx ends.
func servePprof(ctx context.Context, addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	go func() { _ = srv.Serve(lis) }()
	return nil
}
