package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a server the benchmark started: the MACP runtime, Warden, an MCP
// server or the null ext_authz server. Its output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	// admin is Warden's admin (and pprof) address, if it has one.
	admin string
	// cleanup runs after the process exited (nginx's temporary directory).
	cleanup func()
}

// startProc starts bin on loopback with env added to the benchmark's own
// environment, and waits until addr accepts connections.
func startProc(logDir, name, addr string, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// The server dies with the benchmark, even when the benchmark is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	if err := p.waitListening(addr, 30*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// waitListening polls addr until it accepts a connection, the process exits
// or d passes.
func (p *proc) waitListening(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before listening on %s: %s", p.name, addr, p.tail())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not listen on %s within %v: %s", p.name, addr, d, p.tail())
}

// tail is the end of the process's log, for errors.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// pid is the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop interrupts the process and waits for it, killing it after 10 s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	if p.cleanup != nil {
		p.cleanup()
	}
}

// freeAddr picks a free loopback port.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// cpuTime is the user plus system CPU time a process has used, from
// /proc/<pid>/stat ("self" for the benchmark itself).
func cpuTime(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, fmt.Errorf("cpu time: %w", err)
	}
	return parseStat(string(b))
}

// parseStat reads utime + stime from the text of /proc/<pid>/stat.
func parseStat(s string) (time.Duration, error) {
	// The command name (field 2) may hold spaces; the fields after it are
	// counted from its closing parenthesis.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("cpu time: malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("cpu time: short stat")
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("cpu time: %w", err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// rss is a process's resident memory in bytes, VmRSS of /proc/<pid>/status.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	return parseRSS(string(b))
}

// parseRSS reads VmRSS from the text of /proc/<pid>/status, in bytes.
func parseRSS(status string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("rss: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("rss: no VmRSS line")
}

// cpuMeter measures the CPU a process uses over an interval.
type cpuMeter struct {
	pid   string
	start time.Duration
	at    time.Time
}

func startCPU(pid string) cpuMeter {
	t, _ := cpuTime(pid)
	return cpuMeter{pid: pid, start: t, at: time.Now()}
}

// share is the CPU used since the meter started, as a fraction of one core.
func (m cpuMeter) share() float64 {
	t, err := cpuTime(m.pid)
	el := time.Since(m.at)
	if err != nil || el <= 0 {
		return 0
	}
	return (t - m.start).Seconds() / el.Seconds()
}

// machineBusy is the CPU time all cores have spent busy since boot (user,
// nice, system, irq, softirq and steal of /proc/stat's cpu line): with the
// benchmark's own processes subtracted, it shows how much other work shared
// the machine during a run.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("machine busy: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("machine busy: malformed /proc/stat")
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("machine busy: %w", err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// switches are a process's context switches, summed over its threads
// (/proc/<pid>/task/*/status), and its thread count when read.
type switches struct {
	voluntary, involuntary int64
	threads                int
}

// sub is s minus an earlier reading; threads stays s's.
func (s switches) sub(o switches) switches {
	return switches{voluntary: s.voluntary - o.voluntary, involuntary: s.involuntary - o.involuntary, threads: s.threads}
}

// add sums two runs' switches; threads is the later reading's.
func (s switches) add(o switches) switches {
	return switches{voluntary: s.voluntary + o.voluntary, involuntary: s.involuntary + o.involuntary, threads: o.threads}
}

// contextSwitches sums voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches over a process's live threads. A thread that
// exits takes its counts with it; Go's threads rarely exit.
func contextSwitches(pid int) (switches, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return switches{}, fmt.Errorf("context switches: %w", err)
	}
	var s switches
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/status")
		if err != nil {
			continue // the thread exited
		}
		v, nv := parseSwitches(string(b))
		s.voluntary += v
		s.involuntary += nv
		s.threads++
	}
	return s, nil
}

// parseSwitches reads voluntary_ctxt_switches and nonvoluntary_ctxt_switches
// from the text of /proc/<pid>/task/<tid>/status.
func parseSwitches(status string) (voluntary, involuntary int64) {
	for line := range strings.Lines(status) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "voluntary_ctxt_switches":
			voluntary = n
		case "nonvoluntary_ctxt_switches":
			involuntary = n
		}
	}
	return voluntary, involuntary
}
