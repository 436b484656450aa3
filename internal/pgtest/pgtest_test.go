package pgtest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("PGTEST_CHILD"); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(Run(m))
}

// child is the test binary run as a subprocess: it starts a cluster, prints
// the postmaster's PID and directory, then returns through run (mode
// "clean") or waits to be killed (mode "kill").
func child(mode string) int {
	return run(func() int {
		c, err := newCluster(BinDir())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		mu.Lock()
		cl = c
		mu.Unlock()
		fmt.Printf("postmaster %d %s\n", c.proc.Pid, c.dir)
		if mode == "kill" {
			select {}
		}
		return 0
	})
}

func TestFreshDatabases(t *testing.T) {
	a, b := URL(t), URL(t)
	if a == b {
		t.Fatalf("two calls returned the same database %s", a)
	}
	for _, u := range []string{a, b} {
		if strings.Contains(u, "@127.0.0.1:") == false || strings.Contains(u, ":@") || !strings.HasPrefix(u, "postgres://postgres@") {
			t.Fatalf("URL %q: want postgres://postgres@127.0.0.1:PORT/DB with no password", u)
		}
	}
	Exec(t, a, "CREATE TABLE x (v int); INSERT INTO x VALUES (7)")
	if got := Exec(t, a, "SELECT v FROM x"); got != "7" {
		t.Fatalf("SELECT in a = %q, want 7", got)
	}
	if _, err := TryExec(t, b, "SELECT v FROM x"); err == nil || !strings.Contains(err.Error(), `relation "x" does not exist`) {
		t.Fatalf("database b sees a's table: err = %v", err)
	}
	// The socket form reaches the same database.
	if got := Exec(t, SocketURL(t, a), "SELECT v FROM x"); got != "7" {
		t.Fatalf("over the socket: %q", got)
	}
}

// The server never runs as root, and listens on loopback only.
func TestUnprivilegedLoopback(t *testing.T) {
	u := URL(t)
	c := get(t)
	uid := procUID(t, c.proc.Pid)
	if uid == 0 {
		t.Fatalf("postmaster %d runs as root", c.proc.Pid)
	}
	if os.Geteuid() == 0 && uid != 65534 && os.Getenv("MAIDEN_PGTEST_UID") == "" {
		t.Fatalf("postmaster uid %d, want 65534 (nobody)", uid)
	}
	if got := Exec(t, u, "SHOW listen_addresses"); got != "127.0.0.1" {
		t.Fatalf("listen_addresses = %q", got)
	}
	want := "off"
	if Durable() {
		want = "on"
	}
	if got := Exec(t, u, "SHOW fsync"); got != want {
		t.Fatalf("fsync = %q, want %q (MAIDEN_PGTEST_DURABLE=%q)", got, want, os.Getenv("MAIDEN_PGTEST_DURABLE"))
	}
	if got := Exec(t, u, "SELECT current_user"); got != Superuser {
		t.Fatalf("current_user = %q", got)
	}
}

func TestRestartKeepsDataAndPort(t *testing.T) {
	u := URL(t)
	Exec(t, u, "CREATE TABLE k (v text); INSERT INTO k VALUES ('kept')")
	addr := Addr(t)
	old := get(t).proc.Pid
	Restart(t)
	if Addr(t) != addr {
		t.Fatalf("address changed: %s → %s", addr, Addr(t))
	}
	if get(t).proc.Pid == old {
		t.Fatal("restart kept the same postmaster")
	}
	if procAlive(old) {
		t.Fatalf("old postmaster %d still alive", old)
	}
	if got := Exec(t, u, "SELECT v FROM k"); got != "kept" {
		t.Fatalf("after restart: %q", got)
	}

	Stop(t)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Stop", addr)
	}
	Start(t)
	if got := Exec(t, u, "SELECT v FROM k"); got != "kept" {
		t.Fatalf("after Stop/Start: %q", got)
	}
}

// Run stops the server and removes its directory; a test binary killed with
// SIGKILL takes its server down too (parent-death signal).
func TestCleanupByRunAndByDeath(t *testing.T) {
	get(t) // skips or fails when PostgreSQL is missing
	for _, mode := range []string{"clean", "kill"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "PGTEST_CHILD="+mode)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stdout)
			var pid int
			var dir string
			for sc.Scan() {
				if _, err := fmt.Sscanf(sc.Text(), "postmaster %d %s", &pid, &dir); err == nil {
					break
				}
			}
			if pid == 0 {
				cmd.Wait()
				t.Fatal("child printed no postmaster line")
			}
			if !procAlive(pid) {
				t.Fatalf("postmaster %d not running while the child lives", pid)
			}
			if mode == "kill" {
				cmd.Process.Kill()
			}
			cmd.Wait()
			deadline := time.Now().Add(30 * time.Second)
			for procAlive(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("postmaster %d outlived its test binary (%s)", pid, mode)
				}
				time.Sleep(50 * time.Millisecond)
			}
			_, err = os.Stat(dir)
			switch mode {
			case "clean":
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("Run left %s behind (%v)", dir, err)
				}
			case "kill":
				// The next cluster's start removes the dead binary's directory.
				if err != nil {
					t.Fatalf("stat %s: %v", dir, err)
				}
				removeStale()
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("removeStale left %s (%v)", dir, err)
				}
			}
		})
	}
}

// Without Run, URL says how to use the package.
func TestURLNeedsRun(t *testing.T) {
	mu.Lock()
	saved := running
	running = false
	savedCl := cl
	cl = nil
	mu.Unlock()
	defer func() {
		mu.Lock()
		running, cl = saved, savedCl
		mu.Unlock()
	}()
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); URL(rec) }()
	<-done
	if !strings.Contains(rec.msg, "pgtest.Run") {
		t.Fatalf("message %q does not name pgtest.Run", rec.msg)
	}
}

type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(f string, args ...any) {
	r.msg = fmt.Sprintf(f, args...)
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any) {
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func procUID(t *testing.T, pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Uid:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return -1
}

// procAlive: the process exists and is not a zombie.
func procAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// Parallel tests each get their own database at once (CREATE DATABASE
// from the same template, concurrently).
func TestParallelURLs(t *testing.T) {
	seen := make(chan string, 16)
	t.Run("group", func(t *testing.T) {
		for i := range 16 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				u := URL(t)
				Exec(t, u, "CREATE TABLE mine (v int)")
				seen <- u
			})
		}
	})
	close(seen)
	names := map[string]bool{}
	for u := range seen {
		names[u] = true
	}
	if len(names) != 16 {
		t.Fatalf("%d distinct databases for 16 parallel tests", len(names))
	}
}
