package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// machine describes where the benchmark ran.
type machine struct {
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Go     string `json:"go"`
	Kernel string `json:"kernel"`
	// GOMAXPROCS says how the cores were shared between the generator,
	// Warden and the servers behind it.
	GOMAXPROCS map[string]string `json:"gomaxprocs"`
	// Nginx is `nginx -v` of the reference hop ("" when not installed).
	Nginx string `json:"nginx,omitempty"`
}

// describeMachine reads the CPU model from /proc/cpuinfo and the kernel
// release from /proc.
func describeMachine(procs map[string]string) machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version(), GOMAXPROCS: procs}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if bin := nginxBin(); bin != "" {
		out, _ := exec.Command(bin, "-v").CombinedOutput()
		m.Nginx = strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}
