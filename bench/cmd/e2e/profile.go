package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// saveProfiles takes Warden's CPU profile over the measured part of a
// saturation run from its admin port (net/http/pprof), then its heap
// profile, and saves them as <stem>-cpu.pprof and <stem>-heap.pprof. A
// failure is logged, not returned: profiles are an aid, not a figure.
func (c comparison) saveProfiles(ctx context.Context, admin, stem string) {
	select {
	case <-time.After(c.timing.warmup):
	case <-ctx.Done():
		return
	}
	secs := max(1, int(c.timing.measure/time.Second))
	for _, p := range []struct{ path, file string }{
		{fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), stem + "-cpu.pprof"},
		{"/debug/pprof/heap", stem + "-heap.pprof"},
	} {
		if err := fetch(ctx, "http://"+admin+p.path, p.file); err != nil {
			fmt.Fprintf(os.Stderr, "bench: profile %s: %v\n", p.file, err)
		}
	}
}

// fetch saves what url answers into file.
func fetch(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
