package main

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/google/pprof/profile"
)

// With -pprof the null hop serves a CPU profile `make bench` can take the
// way it takes Warden's.
func TestServePprof(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := servePprof(ctx, addr); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
	p, err := profile.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.SampleType) == 0 || p.SampleType[len(p.SampleType)-1].Type != "cpu" {
		t.Errorf("not a CPU profile: %v", p.SampleType)
	}
}
