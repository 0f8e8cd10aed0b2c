package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// child is a server process the harness started.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   string // its standard error, kept in the run's directory
	done  chan struct{}
}

// hand writes s to the child's standard input as one line: how a
// webhook, or echo-webhook, is given a secret without it sitting in an
// argument list or the environment.
func (c *child) hand(s secretLine) error {
	line, _ := json.Marshal(s)
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("handing %s its secret: %w", c.name, err)
	}
	return nil
}

// startChild starts path with args and env, its standard error to a log
// file in dir. With readAddr, the first line of its standard output is
// the address it listens on, awaited up to a minute.
func startChild(name, dir, path string, args, env []string, readAddr bool) (*child, string, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stderr = logf
	// Dies with the harness even if the harness is killed, and in a
	// process group of its own, so that a Ctrl-C reaches only the
	// harness, which then stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	var stdout io.ReadCloser
	if readAddr {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, "", err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, stdin: stdin, log: logPath, done: make(chan struct{})}
	var addr string
	if readAddr {
		line := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			if sc.Scan() {
				line <- sc.Text()
			}
			close(line)
			_, _ = io.Copy(io.Discard, stdout)
		}()
		select {
		case addr = <-line:
		case <-time.After(time.Minute):
		}
	}
	go func() { _ = cmd.Wait(); close(c.done) }()
	if readAddr && addr == "" {
		c.stop()
		return nil, "", fmt.Errorf("%s did not say where it listens: %s", name, c.logTail())
	}
	return c, addr, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// alive says whether the process is still running.
func (c *child) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// stop ends the process: its standard input closed and SIGTERM, then
// SIGKILL after five seconds.
func (c *child) stop() {
	_ = c.stdin.Close()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// logTail is the end of the process's standard error.
func (c *child) logTail() string {
	b, _ := os.ReadFile(c.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// clockTicks is USER_HZ, the unit of /proc CPU times.
var clockTicks = func() int64 {
	if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 100
}()

// procCPU is the user plus system CPU time a process has used, from
// /proc/<pid>/stat ("self" for this one).
func procCPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields follow the
	// last ')'. utime and stime are fields 14 and 15 of the line, 12 and
	// 13 after it (counting state as 1).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: malformed", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%s/stat: malformed times", pid)
	}
	return time.Duration((ut + st) * int64(time.Second) / clockTicks), nil
}

// peakRSS is the largest resident set a process has had, in bytes
// (VmHWM in /proc/<pid>/status).
func peakRSS(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%s/status: malformed VmHWM %q", pid, v)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%s/status: no VmHWM", pid)
}

// machineBusy is the CPU time all processors have spent not idle, from
// /proc/stat (user, nice, system, irq, softirq, steal).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: malformed")
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: malformed")
		}
		busy += n
	}
	return time.Duration(busy * int64(time.Second) / clockTicks), nil
}

// machine describes where a run happened.
type machine struct {
	Date     string `json:"date"`
	CPUs     int    `json:"nproc"`
	CPUModel string `json:"cpuModel"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Commit   string `json:"commit"`
	// Before is -before's commit, if given.
	Before     string `json:"beforeCommit,omitempty"`
	LoadBefore string `json:"loadAverageBefore"`
	LoadAfter  string `json:"loadAverageAfter,omitempty"`
}

func describeMachine(repo string) machine {
	m := machine{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadBefore: loadAverage()}
	if out, err := exec.Command("nproc").Output(); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
			m.CPUs = n
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Commit = commitOf(repo)
	return m
}

// commitOf is repo's HEAD, "+changes" when its tracked files differ.
func commitOf(repo string) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += "+changes"
	}
	return c
}

// loadAverage is the 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
