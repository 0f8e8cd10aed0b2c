package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process of the fleet: in a process group of its own
// (so a signal to the driver's terminal does not reach it before the
// driver decides), killed if the driver dies (Pdeathsig), its output in a
// log file, and its pid in dir/pids so scripts/fleet's trap can kill what
// a crashed driver left.
type proc struct {
	name    string
	logPath string
	pidPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

// start runs bin with args and env (env replaces the environment: the
// fleet's children never inherit the caller's PLATFORM_* or OTEL_*).
func startProc(dir, name, bin string, args, env []string) (*proc, error) {
	p := &proc{
		name:    name,
		logPath: filepath.Join(dir, "logs", name+".log"),
		pidPath: filepath.Join(dir, "pids", name+".pid"),
	}
	return p, p.start(bin, args, env)
}

func (p *proc) start(bin string, args, env []string) error {
	if err := os.MkdirAll(filepath.Dir(p.logPath), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.pidPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	_ = os.WriteFile(p.pidPath, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.err = cmd, exited, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		_ = os.Remove(p.pidPath)
		close(exited)
	}()
	return nil
}

// running reports whether the process has been started and not exited.
func (p *proc) running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return errors.New(p.name + ": not started")
	}
	return cmd.Process.Signal(sig)
}

// stop sends sig and waits up to grace for the exit, then kills the
// process group. It returns the exit status (nil for a clean exit).
func (p *proc) stop(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
	default:
		_ = cmd.Process.Signal(sig)
		select {
		case <-exited:
		case <-time.After(grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return fmt.Errorf("%s did not exit within %s of %s; killed", p.name, grace, sig)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// waitHTTP polls url until it answers want, the process exits, or ctx
// ends.
func waitHTTP(ctx context.Context, p *proc, url string, want int) error {
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
		}
		if p != nil && !p.running() {
			// The folder goes with the run: the log's end travels with the
			// error, for a failure seen only in CI.
			return fmt.Errorf("%s exited while starting (see %s); its log ends:\n%s", p.name, p.logPath, logTail(p.logPath, 20))
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			return fmt.Errorf("%s not answering %d at %s: %w (see its log)", nameOf(p), want, url, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logTail is the last n lines of the log at path, or why it cannot be
// read.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func nameOf(p *proc) string {
	if p == nil {
		return "server"
	}
	return p.name
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// baseEnv is what every child gets from the driver's environment: only
// what a program needs to run, never PLATFORM_*, OTEL_* or VAULT_*.
func baseEnv(home string) []string {
	env := []string{"HOME=" + home, "LANG=C.UTF-8"}
	if path := os.Getenv("PATH"); path != "" {
		env = append(env, "PATH="+path)
	}
	return env
}
