package main

import (
	"bufio"
	"os"
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
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}
