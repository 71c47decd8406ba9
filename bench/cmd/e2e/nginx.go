package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// nginxConf is the configuration of the reference hop: one process (no
// master, no daemon), errors to stderr, no access log, a keepalive pool to
// the upstream, and every file it writes under dir. proto is "grpc" (an
// HTTP/2 listener with grpc_pass) or "http" (HTTP/1.1 proxy_pass, unbuffered).
func nginxConf(dir, listen, proto, upstream string) string {
	var loc, http2 string
	switch proto {
	case "grpc":
		http2 = " http2"
		loc = "grpc_pass grpc://upstream;"
	default:
		loc = `proxy_pass http://upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;`
	}
	conf := `worker_processes 1;
master_process off;
daemon off;
error_log stderr warn;
pid DIR/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path DIR/body;
  proxy_temp_path DIR/proxy;
  fastcgi_temp_path DIR/fastcgi;
  uwsgi_temp_path DIR/uwsgi;
  scgi_temp_path DIR/scgi;
  # the defaults (1,000) would close the benchmark's connections every
  # 1,000 requests
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  upstream upstream {
    server UPSTREAM;
    keepalive 64;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
  }
  server {
    listen LISTENHTTP2;
    location / {
      LOCATION
    }
  }
}
`
	return strings.NewReplacer("DIR", dir, "UPSTREAM", upstream, "LISTEN", listen, "HTTP2", http2, "LOCATION", loc).Replace(conf)
}

// nginxBin is the nginx the benchmark runs, or "" when none is installed
// (scripts/peers.sh all installs it).
func nginxBin() string {
	p, err := exec.LookPath("nginx")
	if err != nil {
		return ""
	}
	return p
}

// startNginx runs nginx on listen in front of upstream, with a configuration
// generated into a temporary directory that stop removes.
func (b *bench) startNginx(name, listen, proto, upstream string) (*proc, error) {
	bin := nginxBin()
	if bin == "" {
		return nil, fmt.Errorf("nginx is not installed (scripts/peers.sh all installs it)")
	}
	dir, err := os.MkdirTemp("", "warden-bench-nginx-")
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(dir, listen, proto, upstream)), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p, err := startProc(b.logDir, name, listen, nil, bin, "-p", dir, "-c", conf, "-e", "stderr")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.cleanup = func() { os.RemoveAll(dir) }
	return p, nil
}
