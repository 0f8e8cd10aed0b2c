package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// postgres is a PostgreSQL server of the fleet's own: a cluster made by
// initdb in the run's folder, on a free loopback port, started and
// stopped with pg_ctl, so stopping it disturbs nothing else on the
// machine. PostgreSQL refuses to run as root; as root, every command runs
// as the postgres user (runuser), which owns the cluster's folders.
type postgres struct {
	bin     string // folder of initdb, pg_ctl, psql
	data    string
	sock    string
	logPath string
	port    int
	asUser  []string // prefix running a command as the cluster's owner
	uid     int
	gid     int
}

func newPostgres(bin, dir string) (*postgres, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pg := &postgres{
		bin:     bin,
		data:    filepath.Join(dir, "pg", "data"),
		sock:    filepath.Join(dir, "pg", "sock"),
		logPath: filepath.Join(dir, "logs", "postgres.log"),
		port:    port,
		uid:     -1,
		gid:     -1,
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL needs the postgres user: %w", err)
		}
		pg.uid, _ = strconv.Atoi(u.Uid)
		pg.gid, _ = strconv.Atoi(u.Gid)
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			return nil, fmt.Errorf("running as root needs runuser to start PostgreSQL as postgres: %w", err)
		}
		pg.asUser = []string{runuser, "-u", "postgres", "--"}
	}
	return pg, nil
}

// URL is the platform database's URL.
func (pg *postgres) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/platform?sslmode=disable", pg.port)
}

func (pg *postgres) run(ctx context.Context, name string, args ...string) error {
	argv := append(append([]string{}, pg.asUser...), append([]string{filepath.Join(pg.bin, name)}, args...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = baseEnv(os.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// init makes the cluster and the platform's database, and starts it.
func (pg *postgres) init(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(pg.logPath), 0o755); err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(pg.data), pg.sock} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if pg.uid >= 0 {
			if err := os.Chown(d, pg.uid, pg.gid); err != nil {
				return err
			}
		}
	}
	// The run's folder is the caller's (0700 from mktemp); the cluster's
	// owner must be able to reach its own folders and the log.
	if pg.uid >= 0 {
		if err := os.Chmod(filepath.Dir(filepath.Dir(pg.data)), 0o755); err != nil {
			return err
		}
		if f, err := os.OpenFile(pg.logPath, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
			_ = os.Chown(pg.logPath, pg.uid, pg.gid)
		}
	}
	if err := pg.run(ctx, "initdb", "-D", pg.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		return err
	}
	if err := pg.start(ctx); err != nil {
		return err
	}
	return pg.run(ctx, "psql", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "postgres", "-d", "postgres",
		"-v", "ON_ERROR_STOP=1", "-q", "-c", "CREATE DATABASE platform")
}

// start starts the server and waits until it accepts connections.
func (pg *postgres) start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c max_connections=300", pg.port, pg.sock)
	return pg.run(ctx, "pg_ctl", "-D", pg.data, "-l", pg.logPath, "-o", opts, "-w", "-t", "60", "start")
}

// stop stops the server with the given mode (fast: roll back open
// transactions and close every connection; immediate: abort).
func (pg *postgres) stop(ctx context.Context, mode string) error {
	return pg.run(ctx, "pg_ctl", "-D", pg.data, "-m", mode, "-w", "-t", "60", "stop")
}

// close stops the server if it runs (at the end of a run, or on failure).
func (pg *postgres) close() {
	if _, err := os.Stat(filepath.Join(pg.data, "postmaster.pid")); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if pg.stop(ctx, "fast") != nil {
		_ = pg.stop(ctx, "immediate")
	}
}
