// Package pgtest gives tests a real PostgreSQL: one throwaway cluster per
// test binary, made with initdb in a temporary directory and served by a
// postgres process on a free port of 127.0.0.1 (its Unix socket in that
// directory), and one new database per test. Main stops the server and
// removes its files when the tests end, and so does a SIGINT, SIGTERM or
// SIGHUP of the test binary (teardown.OnInterrupt, with its other
// cleanups); the server gets SIGKILL if the test process dies in any other
// way (Pdeathsig), so no cluster outlives its tests.
//
// The server binaries are found in /usr/lib/postgresql/<major>/bin (the
// Debian package postgresql), the newest major first, or on PATH. initdb
// refuses to run as root, so as root the cluster is made and served as
// the postgres user the package creates.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loopd/loopd/internal/teardown"
)

// startWait bounds the wait for a new server to take connections.
const startWait = 30 * time.Second

// ErrMissing means PostgreSQL's server binaries are not installed.
var ErrMissing = errors.New("PostgreSQL server binaries (initdb, postgres) not found: apt-get install postgresql")

// the cluster of this test binary, started by the first URL.
var (
	mu      sync.Mutex
	current *cluster
	failed  error
	dbs     atomic.Int64
)

type cluster struct {
	dir    string // removed by stop
	port   int
	admin  *pgx.Conn // to the postgres database, guarded by mu
	proc   *os.Process
	exited chan struct{}
}

// Main runs m and then stops the cluster, if a test started one, and
// removes its files; it returns m.Run's code. A test binary that uses URL
// calls it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	stop()
	return code
}

// URL returns the URL of a new, empty database on the cluster of this
// test binary, starting the cluster first if need be; the database is
// dropped at the end of t. Without PostgreSQL, t fails when the
// environment variable CI is "true" and is skipped with the reason
// otherwise.
func URL(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if current == nil && failed == nil {
		current, failed = start()
	}
	if failed != nil {
		if errors.Is(failed, ErrMissing) && os.Getenv("CI") != "true" {
			t.Skipf("pgtest: %v", failed)
		}
		t.Fatalf("pgtest: %v", failed)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbs.Add(1))
	ctx := context.Background()
	if _, err := current.admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if current == nil {
			return
		}
		if _, err := current.admin.Exec(context.Background(), `DROP DATABASE `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return current.url(name)
}

func (c *cluster) url(db string) string {
	return fmt.Sprintf("postgres://loopd@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// binDir returns the directory of the newest server binaries installed.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return major(b) - major(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrMissing
}

// major is the version of /usr/lib/postgresql/<major>/bin, 0 if none.
func major(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// start makes and starts a cluster, and stops it on an interrupt of the
// test binary (teardown.OnInterrupt).
func start() (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "loopd-pgtest-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "loopd",
		"--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// A port found free can be taken before postgres binds it: try again.
	for try := 0; ; try++ {
		if err = c.serve(bin, cred); err == nil {
			break
		}
		if try == 2 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	current = c
	teardown.OnInterrupt(func() {
		mu.Lock()
		defer mu.Unlock()
		stop()
	})
	return c, nil
}

// credential returns the postgres user's, when this process runs as root
// (initdb refuses root); nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no postgres user to run the server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// serve starts postgres on a free port and waits until it takes
// connections.
func (c *cluster) serve(bin string, cred *syscall.Credential) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(c.dir, "postgres.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(c.dir, "data"), "-p", strconv.Itoa(port),
		"-k", c.dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig is sent when the thread that started the child ends, so
	// the child is started from a thread kept for it until it exits.
	started, exited := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	c.port, c.proc, c.exited = port, cmd.Process, exited
	deadline := time.Now().Add(startWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.url("postgres"))
		cancel()
		if err == nil {
			c.admin = conn
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
			return fmt.Errorf("postgres exited at start on port %d:\n%s", port, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.kill()
			return fmt.Errorf("postgres on port %d took no connection in %s: %w", port, startWait, err)
		}
	}
}

// freePort returns a TCP port of 127.0.0.1 free at the time of the call.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// kill ends the server at once (SIGQUIT: PostgreSQL's immediate shutdown,
// which stops its backends too) and waits for it, SIGKILL past 10 s.
func (c *cluster) kill() {
	c.proc.Signal(syscall.SIGQUIT)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.proc.Kill()
		<-c.exited
	}
}

// stop ends the current cluster and removes its files; mu is held.
func stop() {
	if current == nil {
		return
	}
	if current.admin != nil {
		current.admin.Close(context.Background())
	}
	current.kill()
	os.RemoveAll(current.dir)
	current = nil
}
