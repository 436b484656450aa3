// Package pgtest is test-only: a throwaway PostgreSQL cluster per test binary
// and a fresh database per test.
//
// A test binary that uses it wraps its tests with Run (or Main):
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
//
// and a test asks for a database with URL(t). The first call starts one
// cluster (initdb + postgres from Debian's postgresql package) in a fresh
// temporary directory, listening on 127.0.0.1 on a free port and on a unix
// socket in that directory; every call creates a new database on it. Run
// stops the cluster by its PID when the tests end and removes the directory.
// As a backstop, the postmaster gets a parent-death signal, so a test binary
// that is killed does not leave a server behind.
//
// Tests run as root here and in CI, and initdb refuses root: the cluster then
// belongs to an unprivileged user (nobody, uid 65534, or MAIDEN_PGTEST_UID),
// which owns the temporary directory. Run as any other user, the cluster
// belongs to that user.
//
// Authentication is trust, for the superuser "postgres", on loopback and on
// the socket (whose directory only the cluster's user and root can enter): a
// throwaway cluster for tests, not a server to keep. Settings favour speed
// (fsync off, no synchronous commit; MAIDEN_PGTEST_DURABLE=1 turns both on,
// see Durable); a clean stop or Restart still loses nothing.
//
// When the binaries are missing, URL skips the test with a message saying
// what to install, except with MAIDEN_CI set (.ci/run sets it; make test installs
// the package), where it fails the test.
package pgtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Superuser is the cluster's superuser role, the user of every URL.
const Superuser = "postgres"

// dirPrefix names the temporary directories, so a later run can remove those
// of a test binary that died without cleaning up.
const dirPrefix = "maiden-pgtest-"

var (
	mu      sync.Mutex
	running bool // inside Run
	cl      *cluster
	startEr error // the first start's failure, reported to every later caller
	dbSeq   int
)

// cluster is the one server of this test binary.
type cluster struct {
	bin     string // directory of initdb, postgres, psql
	dir     string // the temporary directory: data/, the socket, the log
	data    string
	sockDir string
	port    int
	cred    *syscall.Credential // nil: run as the current user
	uid     int
	proc    *os.Process
	exited  chan struct{} // closed when the postmaster has exited
	logPath string
}

// Run runs the tests and stops the cluster (if a test started one) after
// them, returning m.Run's exit code. Call it from TestMain.
func Run(m *testing.M) int { return run(m.Run) }

func run(tests func() int) int {
	mu.Lock()
	running = true
	mu.Unlock()
	code := tests()
	mu.Lock()
	defer mu.Unlock()
	if cl != nil {
		if err := cl.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
		if err := os.RemoveAll(cl.dir); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: removing the cluster's directory: %v\n", err)
		}
		cl = nil
	}
	running = false
	return code
}

// Main is os.Exit(Run(m)), for a TestMain that does nothing else.
func Main(m *testing.M) { os.Exit(Run(m)) }

// URL returns the postgres:// URL (no password) of a fresh, empty database on
// the test binary's cluster, starting the cluster on first use. The URL
// connects over TCP to 127.0.0.1 with sslmode=disable.
func URL(t testing.TB) string {
	t.Helper()
	c := get(t)
	mu.Lock()
	dbSeq++
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq)
	mu.Unlock()
	if _, err := c.psql("postgres", "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	return c.url(name)
}

// SocketURL is URL's database reached over the cluster's unix socket instead
// of TCP (postgres://postgres@/NAME?host=DIR&port=PORT).
func SocketURL(t testing.TB, dbURL string) string {
	t.Helper()
	c := get(t)
	name, err := dbName(dbURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	q := url.Values{"host": {c.sockDir}, "port": {strconv.Itoa(c.port)}}
	return (&url.URL{Scheme: "postgres", User: url.User(Superuser), Path: "/" + name, RawQuery: q.Encode()}).String()
}

// Addr is the cluster's TCP address, 127.0.0.1:PORT.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(get(t).port))
}

// Exec runs SQL (one or more statements) as the superuser in the database of
// dbURL through psql, and returns psql's unaligned, tuples-only output. A
// failing statement fails the test.
func Exec(t testing.TB, dbURL, sql string) string {
	t.Helper()
	out, err := TryExec(t, dbURL, sql)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return out
}

// TryExec is Exec returning the error (psql's message) instead of failing.
func TryExec(t testing.TB, dbURL, sql string) (string, error) {
	t.Helper()
	c := get(t)
	name, err := dbName(dbURL)
	if err != nil {
		return "", err
	}
	return c.psql(name, sql)
}

// Restart stops the cluster (a fast shutdown: connections are closed, nothing
// committed is lost) and starts it again on the same port and socket. Every
// test of the binary shares the cluster, so a test that calls Restart must not
// run in parallel with other tests that use it.
func Restart(t testing.TB) {
	t.Helper()
	RestartAfter(t, 0)
}

// RestartAfter is Restart with the server down for at least d before it
// starts again (a fault test's outage).
func RestartAfter(t testing.TB, d time.Duration) {
	t.Helper()
	c := get(t)
	mu.Lock()
	defer mu.Unlock()
	if err := c.stop(); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
	time.Sleep(d)
	if err := c.start(); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
}

// Stop stops the cluster until Start (for a test of what a client does while
// the server is down). The same caveat as Restart's applies.
func Stop(t testing.TB) {
	t.Helper()
	c := get(t)
	mu.Lock()
	defer mu.Unlock()
	if err := c.stop(); err != nil {
		t.Fatalf("pgtest: stop: %v", err)
	}
}

// Start starts the cluster again after Stop, on the same port and socket.
func Start(t testing.TB) {
	t.Helper()
	c := get(t)
	mu.Lock()
	defer mu.Unlock()
	if c.proc != nil {
		return
	}
	if err := c.start(); err != nil {
		t.Fatalf("pgtest: start: %v", err)
	}
}

// Durable reports whether the cluster commits to disk as a production
// server does (MAIDEN_PGTEST_DURABLE=1: fsync and synchronous_commit on,
// for benchmarks against SQLite's synchronous=FULL); by default it does not
// (fsync off, faster tests; a clean stop still loses nothing).
func Durable() bool { return os.Getenv("MAIDEN_PGTEST_DURABLE") == "1" }

// BinDir returns the directory of PostgreSQL's server binaries (initdb,
// postgres, psql) or "" when none is installed: MAIDEN_PGTEST_BINDIR, else the
// newest /usr/lib/postgresql/*/bin (Debian), else the directory of an initdb
// on PATH.
func BinDir() string {
	if d := os.Getenv("MAIDEN_PGTEST_BINDIR"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func pgVersion(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// get returns the running cluster, starting it on first use; it skips or
// fails t when that is impossible.
func get(t testing.TB) *cluster {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if cl != nil {
		return cl
	}
	if !running {
		t.Fatal("pgtest: the test binary must run its tests through pgtest.Run: func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }")
	}
	bin := BinDir()
	if bin == "" || !isExec(filepath.Join(bin, "psql")) {
		if os.Getenv("MAIDEN_CI") != "" {
			t.Fatal("pgtest: PostgreSQL's binaries (initdb, postgres, psql) are not installed: make test installs them (scripts/deps; apt-get install postgresql)")
		}
		t.Skip("pgtest: PostgreSQL is not installed (apt-get install postgresql, or set MAIDEN_PGTEST_BINDIR); the PostgreSQL tests run in CI")
	}
	if startEr != nil {
		t.Fatalf("pgtest: the cluster failed to start earlier: %v", startEr)
	}
	c, err := newCluster(bin)
	if err != nil {
		startEr = err
		t.Fatalf("pgtest: %v", err)
	}
	cl = c
	return c
}

func newCluster(bin string) (*cluster, error) {
	removeStale()
	c := &cluster{bin: bin, uid: os.Getuid()}
	if os.Geteuid() == 0 {
		uid, gid := 65534, 65534
		if s := os.Getenv("MAIDEN_PGTEST_UID"); s != "" {
			u, err := user.LookupId(s)
			if err != nil {
				return nil, fmt.Errorf("MAIDEN_PGTEST_UID=%s: %v", s, err)
			}
			uid, _ = strconv.Atoi(u.Uid)
			gid, _ = strconv.Atoi(u.Gid)
		}
		c.uid = uid
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: false}
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	c.dir = dir
	c.data = filepath.Join(dir, "data")
	c.sockDir = filepath.Join(dir, "sock")
	c.logPath = filepath.Join(dir, "postgres.log")
	fail := func(err error) (*cluster, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	// The test binary's PID, so that a later run can tell a dead binary's
	// directory from a live one's.
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return fail(err)
	}
	for _, d := range []string{c.data, c.sockDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fail(err)
		}
	}
	if c.cred != nil {
		// The whole directory belongs to the cluster's user (0700): its
		// parents must let that user through.
		if err := traversable(dir, c.uid); err != nil {
			return fail(err)
		}
		for _, p := range []string{dir, c.data, c.sockDir} {
			if err := os.Chown(p, c.uid, int(c.cred.Gid)); err != nil {
				return fail(err)
			}
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", c.data, "-U", Superuser,
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.Env = c.env()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb in %s (as uid %d): %v\n%s", c.data, c.uid, err, tail(out, 2000)))
	}
	durability := "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
	if Durable() {
		durability = "fsync = on\nsynchronous_commit = on\nfull_page_writes = on\n"
	}
	conf := "\n# pgtest: a throwaway cluster for tests\n" +
		"listen_addresses = '127.0.0.1'\n" +
		"unix_socket_directories = '" + c.sockDir + "'\n" +
		"unix_socket_permissions = 0700\n" +
		durability +
		"max_connections = 300\nshared_buffers = 64MB\n" +
		"log_min_messages = warning\nlog_line_prefix = '%m [%p] '\n"
	if err := appendFile(filepath.Join(c.data, "postgresql.conf"), conf); err != nil {
		return fail(err)
	}
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\n"
	if err := os.WriteFile(filepath.Join(c.data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fail(err)
	}
	if c.cred != nil {
		if err := os.Chown(filepath.Join(c.data, "pg_hba.conf"), c.uid, int(c.cred.Gid)); err != nil {
			return fail(err)
		}
	}
	var lastErr error
	for range 5 { // a free port can be taken between the probe and the bind
		if c.port, err = freePort(); err != nil {
			return fail(err)
		}
		if lastErr = c.start(); lastErr == nil {
			return c, nil
		}
	}
	return fail(lastErr)
}

func (c *cluster) env() []string {
	env := []string{"PATH=" + c.bin + ":/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
	if c.cred == nil {
		env = append(env, "HOME="+c.dir)
	}
	return env
}

// start starts the postmaster and waits until it accepts connections. The
// postmaster is started from a goroutine locked to its OS thread that stays
// until the server exits, because the parent-death signal follows the thread
// that started the process.
func (c *cluster) start() error {
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.data, "-p", strconv.Itoa(c.port))
	cmd.Dir = c.dir
	cmd.Env = c.env()
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			close(exited)
			return
		}
		started <- nil
		cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting postgres: %v", err)
	}
	c.proc, c.exited = cmd.Process, exited
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			c.proc = nil
			return fmt.Errorf("postgres on 127.0.0.1:%d exited during start-up:\n%s", c.port, c.logTail())
		default:
		}
		if c.ready() {
			return nil
		}
		if time.Now().After(deadline) {
			c.stop()
			return fmt.Errorf("postgres on 127.0.0.1:%d not ready after 60 s:\n%s", c.port, c.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ready reads the postmaster.pid status line (PostgreSQL 10+) and checks the
// TCP port answers.
func (c *cluster) ready() bool {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[len(lines)-1]) != "ready" {
		return false
	}
	if pid, _ := strconv.Atoi(strings.TrimSpace(lines[0])); pid != c.proc.Pid {
		return false
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)), time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// stop asks the postmaster for a fast shutdown (SIGINT) and waits for it;
// after 30 s it kills it. It signals only the process it started.
func (c *cluster) stop() error {
	if c.proc == nil {
		return nil
	}
	p, exited := c.proc, c.exited
	c.proc = nil
	if err := p.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping postgres (pid %d): %v", p.Pid, err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
	}
	p.Kill()
	<-exited
	return fmt.Errorf("postgres (pid %d) ignored a fast shutdown for 30 s and was killed:\n%s", p.Pid, c.logTail())
}

func (c *cluster) url(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(Superuser),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// psql runs sql in database db over the socket, as the superuser.
func (c *cluster) psql(db, sql string) (string, error) {
	cmd := exec.Command(filepath.Join(c.bin, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-h", c.sockDir, "-p", strconv.Itoa(c.port), "-U", Superuser, "-d", db, "-c", sql)
	cmd.Env = append(c.env(), "PGCONNECT_TIMEOUT=10", "HOME="+c.dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("psql %q in database %s: %v: %s", short(sql), db, err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimRight(out.String(), "\n"), nil
}

func (c *cluster) logTail() string {
	b, _ := os.ReadFile(c.logPath)
	return tail(b, 3000)
}

func dbName(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("database URL: %v", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return "", fmt.Errorf("database URL %q names no database", dbURL)
	}
	return name, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port on 127.0.0.1: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// traversable checks that uid can reach dir: every parent must be
// searchable by it (others' x bit, or its own directory).
func traversable(dir string, uid int) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		ok := fi.Mode().Perm()&0o001 != 0 || (st != nil && int(st.Uid) == uid && fi.Mode().Perm()&0o100 != 0)
		if !ok {
			return fmt.Errorf("the cluster's user (uid %d) cannot enter %s (mode %v): set TMPDIR to a directory it can reach, such as /tmp", uid, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// removeStale removes the directories of earlier test binaries that died
// without cleaning up: those whose owner.pid names a process that no longer
// exists. A server they left behind got its parent-death signal.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			if pm, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
				if p, _ := strconv.Atoi(firstLine(pm)); p > 0 && syscall.Kill(p, 0) == nil {
					continue // its server still runs: leave it alone
				}
			}
			os.RemoveAll(d)
		}
	}
}

func firstLine(b []byte) string {
	s := bufio.NewScanner(bytes.NewReader(b))
	if s.Scan() {
		return strings.TrimSpace(s.Text())
	}
	return ""
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func short(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
