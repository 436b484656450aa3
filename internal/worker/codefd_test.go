package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/maiden-run/maiden/internal/compcache"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// TestCodeFileSealed: the memfd every worker loading an artifact maps is
// sealed before any worker sees it: a worker holding it (or the parent)
// cannot write it, resize it, map it writable and shared, or remove the
// seals, so no worker changes the code another loads.
func TestCodeFileSealed(t *testing.T) {
	t.Parallel()
	f, size, err := codeFileOf([]byte("compiled code"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if size != int64(len("compiled code")) {
		t.Fatalf("size %d", size)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if seals != codeSeals {
		t.Errorf("seals %#x, want %#x", seals, codeSeals)
	}
	for _, tc := range []struct {
		name string
		try  func() error
	}{
		{"pwrite", func() error { _, err := unix.Pwrite(fd, []byte("X"), 0); return err }},
		{"write at the end", func() error { _, err := unix.Pwrite(fd, []byte("X"), size); return err }},
		{"ftruncate shorter", func() error { return unix.Ftruncate(fd, 1) }},
		{"ftruncate longer", func() error { return unix.Ftruncate(fd, 1<<20) }},
		{"fallocate", func() error { return unix.Fallocate(fd, 0, 0, 1<<20) }},
		{"mmap shared writable", func() error {
			m, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err == nil {
				unix.Munmap(m)
			}
			return err
		}},
		{"add a seal", func() error {
			_, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE)
			return err
		}},
	} {
		if err := tc.try(); !errors.Is(err, unix.EPERM) {
			t.Errorf("%s: %v, want EPERM (sealed)", tc.name, err)
		}
	}
	got := make([]byte, size)
	if _, err := f.ReadAt(got, 0); err != nil || string(got) != "compiled code" {
		t.Errorf("content %q, %v", got, err)
	}
}

// TestCodeByDescriptor: a pool hands its workers compiled code as a memfd
// over the code channel (the load frame carries the size, not the bytes),
// and a tool so loaded runs; an artifact read back from the disk cache
// comes the same way, with no copy of it in the parent's heap.
func TestCodeByDescriptor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := newPool(t, &Options{Size: 1, CacheDir: dir})
	p.mem.minFile = 0 // the WAT echo's few KB in a memfd too
	tool, err := p.Open(context.Background(), testkit.Component(t, "echo"), lim)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tool.Execute(context.Background(), sandbox.Call{Limits: lim, Input: `{"message":"by descriptor"}`})
	if err != nil || out.Failure != nil || !strings.Contains(out.Output, "by descriptor") {
		t.Fatalf("call: %+v, %v", out, err)
	}
	a, ok := p.mem.Get(tool.Digest)
	if !ok || a.file == nil || a.code != nil {
		t.Fatalf("the artifact in memory: %+v (want a memfd)", a)
	}
	a.close()

	// A second pool over the same disk cache: its artifact comes from disk
	// straight into a memfd.
	p2 := newPool(t, &Options{Size: 1, CacheDir: dir})
	p2.mem.minFile = 0
	tool2, err := p2.Open(context.Background(), testkit.Component(t, "echo"), lim)
	if err != nil {
		t.Fatal(err)
	}
	if !tool2.Cached {
		t.Error("the second pool compiled again")
	}
	out, err = tool2.Execute(context.Background(), sandbox.Call{Limits: lim, Input: `{"message":"from disk"}`})
	if err != nil || out.Failure != nil || !strings.Contains(out.Output, "from disk") {
		t.Fatalf("call: %+v, %v", out, err)
	}
	b, ok := p2.mem.Get(tool2.Digest)
	if !ok || b.file == nil {
		t.Fatalf("the artifact from disk: %+v (want a memfd)", b)
	}
	b.close()
}

// TestCodeChannelFullKillsTheWorker: a worker that leaves the descriptors
// it is sent unread (a hostile one answers loads without taking them)
// fills its code channel, and the parent's next send is refused at once:
// the parent kills it rather than block or queue descriptors without
// bound.
func TestCodeChannelFullKillsTheWorker(t *testing.T) {
	t.Parallel()
	c, end, err := newCodeChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()
	defer c.close()
	f, _, err := codeFileOf([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sent int
	for sent = 0; sent < 1000; sent++ {
		if err := c.send(f); err != nil {
			if !errors.Is(err, errChannelFull) {
				t.Fatalf("after %d: %v, want errChannelFull", sent, err)
			}
			break
		}
	}
	if sent == 0 || sent == 1000 {
		t.Fatalf("%d descriptors queued before the channel refused", sent)
	}
	t.Logf("the channel held %d unread descriptors", sent)
	c.close()
	if err := c.send(f); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a send after close: %v, want os.ErrClosed", err)
	}
}

// TestReceiveCodeRefusesWhatIsNotCode: the worker takes only one regular
// file of the size the load frame names; anything else (no descriptor, a
// size that differs, a socket, two descriptors) fails the load with a
// reason and leaves no descriptor behind. (Not parallel: it counts this
// process's descriptors.)
func TestReceiveCodeRefusesWhatIsNotCode(t *testing.T) {
	code, _, err := codeFileOf([]byte("twelve bytes"))
	if err != nil {
		t.Fatal(err)
	}
	defer code.Close()
	sock, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	for _, tc := range []struct {
		name string
		send func(fd int) error
		size uint64
		want string
	}{
		{"nothing sent", func(int) error { return nil }, 12, "resource temporarily unavailable"},
		{"a byte and no descriptor", func(fd int) error { return unix.Sendmsg(fd, []byte{1}, nil, nil, 0) }, 12, "with 0 descriptors"},
		{"another size", func(fd int) error { return unix.Sendmsg(fd, []byte{1}, unix.UnixRights(int(code.Fd())), nil, 0) }, 11, "12 bytes, want a file of 11"},
		{"a device", func(fd int) error { return unix.Sendmsg(fd, []byte{1}, unix.UnixRights(int(sock.Fd())), nil, 0) }, 12, "want a file of 12"},
		{"two descriptors", func(fd int) error {
			return unix.Sendmsg(fd, []byte{1}, unix.UnixRights(int(code.Fd()), int(code.Fd())), nil, 0)
		}, 12, "with 2 descriptors"},
		{"size zero", func(fd int) error { return nil }, 0, "compiled code of 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			// Above 3, as a worker's channel is: receiveCode refuses 0-2.
			ch, err := unix.FcntlInt(uintptr(fds[1]), unix.F_DUPFD_CLOEXEC, 10)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(ch)
			if err := tc.send(fds[0]); err != nil {
				t.Fatal(err)
			}
			before := openFDs(t)
			_, _, err = receiveCode(ch, tc.size)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("receiveCode: %v, want an error mentioning %q", err, tc.want)
			}
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open after, %d before: one received was kept", after, before)
			}
		})
	}
	// The control: the memfd, at its size.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := unix.Sendmsg(fds[0], []byte{1}, unix.UnixRights(int(code.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	b, unmap, err := receiveCode(fds[1], 12)
	if err != nil || string(b) != "twelve bytes" {
		t.Fatalf("receiveCode: %q, %v", b, err)
	}
	unmap()
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// openFDsOf is how many of the process's descriptors are open on the file
// fd is open on (its device and inode): unlike openFDs, not moved by
// descriptors other goroutines (a pool's workers ending) open or close
// meanwhile.
func openFDsOf(t *testing.T, fd int) int {
	t.Helper()
	var want unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Stat("/proc/self/fd/"+e.Name(), &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			n++
		}
	}
	return n
}

// TestLoadToCopiesWhatMatched: compcache.LoadTo writes the verified bytes
// of an entry to its destination, refuses (and removes) an entry whose
// bytes changed, and keeps an intact entry when the destination fails.
func TestLoadToCopiesWhatMatched(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := compcache.Open(dir, "fp", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	digest := strings.Repeat("ab", 32)
	code := bytes.Repeat([]byte("code"), 50000)
	if err := c.Put(digest, code); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if n, err := c.LoadTo(digest, &buf); err != nil || n != int64(len(code)) || !bytes.Equal(buf.Bytes(), code) {
		t.Fatalf("LoadTo: %d bytes, %v", n, err)
	}
	full := errors.New("no space")
	if _, err := c.LoadTo(digest, failingWriter{full}); !errors.Is(err, full) {
		t.Fatalf("LoadTo to a failing writer: %v, want its error", err)
	}
	if _, err := c.LoadTo(digest, io.Discard); err != nil {
		t.Fatalf("the entry after a failed destination: %v (it must stay)", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// codeProbes run in a confined worker whose code channel is fd 3 (one
// sealed memfd waiting in it) and with a stream socket at fd 4, as its IPC
// socket is: recvmsg passes on the channel and nowhere else, and what it
// receives cannot be mapped shared or have its mode changed.
var codeProbes = []probeCall{
	{"recvmsg the code channel", func(string, int) error {
		oob := make([]byte, unix.CmsgSpace(4))
		var b [1]byte
		_, oobn, _, _, err := unix.Recvmsg(3, b[:], oob, unix.MSG_DONTWAIT)
		if err != nil {
			return err
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return unix.EBADMSG
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			return unix.EBADMSG
		}
		received = fds[0]
		return nil
	}},
	{"recvmsg the IPC socket", func(string, int) error {
		var b [1]byte
		_, _, _, _, err := unix.Recvmsg(4, b[:], nil, unix.MSG_DONTWAIT)
		return err
	}},
	{"recvmsg stdin", func(string, int) error {
		var msg unix.Msghdr
		return sys(unix.SYS_RECVMSG, 0, uintptr(unsafe.Pointer(&msg)), unix.MSG_DONTWAIT)
	}},
	{"mmap the code shared", func(string, int) error {
		m, err := unix.Mmap(received, 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
		if err == nil {
			unix.Munmap(m)
		}
		return err
	}},
	{"fchmod the code", func(string, int) error { return sys(unix.SYS_FCHMOD, uintptr(received), 0o666) }},
	{"mmap the code private", func(string, int) error {
		m, err := unix.Mmap(received, 0, 4096, unix.PROT_READ, unix.MAP_PRIVATE)
		if err == nil {
			unix.Munmap(m)
		}
		return err
	}},
}

// received is the descriptor codeProbes' first probe received.
var received = -1

func codeWant(name string) unix.Errno {
	switch name {
	case "recvmsg the code channel", "mmap the code private":
		return 0
	}
	return unix.EPERM
}

func init() { probeLists["code"] = codeProbes }

// TestWorkerRecvmsgOnlyOnTheCodeChannel: a confined worker receives
// descriptors on its code channel alone. recvmsg on its IPC socket, or on
// any other descriptor, is the filter's EPERM (a worker that could read
// its socket by recvmsg would take descriptors from frames meant as
// bytes); and the memfd it receives can be mapped privately (to load it)
// but not shared, nor its mode changed.
func TestWorkerRecvmsgOnlyOnTheCodeChannel(t *testing.T) {
	t.Parallel()
	ch, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ipc, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	parentCh, childCh := os.NewFile(uintptr(ch[0]), "channel"), os.NewFile(uintptr(ch[1]), "channel")
	parentIPC, childIPC := os.NewFile(uintptr(ipc[0]), "ipc"), os.NewFile(uintptr(ipc[1]), "ipc")
	defer parentCh.Close()
	defer parentIPC.Close()
	code, _, err := codeFileOf(bytes.Repeat([]byte{0xcc}, 4096))
	if err != nil {
		t.Fatal(err)
	}
	defer code.Close()
	if err := unix.Sendmsg(int(parentCh.Fd()), []byte{1}, unix.UnixRights(int(code.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	// A byte waits on the IPC socket too, so a recvmsg let through there
	// would succeed rather than find nothing.
	if _, err := parentIPC.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mustExe(t), "filter-probe", "code")
	cmd.Env = []string{envWorker + "=1", envCode + "=" + strconv.Itoa(3)}
	cmd.ExtraFiles = []*os.File{childCh, childIPC} // fd 3, fd 4
	got, note, _ := probeOut(t, cmd)
	childCh.Close()
	childIPC.Close()
	checkProbes(t, note, codeProbes, got, codeWant)
}

// TestHostileWorkerLeavesCodeUnread: a worker that answers a load without
// taking the descriptor sent for it is killed at that answer, the load
// failing with the reason, rather than kept with descriptors piling up in
// its channel.
func TestHostileWorkerLeavesCodeUnread(t *testing.T) {
	t.Parallel()
	good := newPool(t, nil)
	good.mem.minFile = 0 // the WAT echo in a memfd
	if _, err := good.Open(context.Background(), testkit.Component(t, "echo"), lim); err != nil {
		t.Fatal(err)
	}
	bad := newPool(t, &Options{Command: []string{mustExe(t), "hostile-code-unread"}, Size: 1, StartTimeout: 10 * time.Second})
	bad.mem = good.mem
	bad.setFingerprint(good.fingerprint)
	w, err := bad.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.release(w, false)
	err = bad.ensureLoaded(context.Background(), w, firstKey(good))
	if err == nil || !strings.Contains(err.Error(), "answered a load without taking the compiled code sent to it") {
		t.Fatalf("load: %v, want it refused for the code left unread", err)
	}
	select {
	case <-w.exited:
	case <-time.After(testkit.Slack(t, 10*time.Second)):
		t.Fatal("the worker that left its code unread is still running")
	}
	if r := w.killReason(); r != killedProtocol {
		t.Errorf("killed for %v, want a protocol violation", r)
	}
}

// TestArtifactLookupKeepsNoDescriptor: looking compiled code up (each
// version of a file the registry reads) takes a duplicate of the memfd,
// which the lookup closes: twenty lookups leave no descriptor open. (Not
// parallel: it counts this process's descriptors.)
func TestArtifactLookupKeepsNoDescriptor(t *testing.T) {
	p := newPool(t, &Options{Size: 1})
	p.mem.minFile = 0
	path := testkit.Component(t, "echo")
	if _, err := p.Open(context.Background(), path, lim); err != nil {
		t.Fatal(err)
	}
	// The version Open compiled, forgotten: the next get reads the file
	// again and finds its code in memory.
	v, err := p.reg.get(context.Background(), path, "")
	if err != nil {
		t.Fatal(err)
	}
	p.reg.forget(path, v)
	before := openFDs(t)
	for range 20 {
		v, err := p.reg.get(context.Background(), path, "")
		if err != nil || !v.cached {
			t.Fatalf("get: %+v, %v", v, err)
		}
		p.reg.forget(path, v)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after 20 lookups, %d before", after, before)
	}
}

// TestSmallCodeStaysBytes: an artifact under a MiB is kept as bytes (it
// loads as fast in the frame) and one from it up in a memfd, whichever way
// it arrives, so the memfds a pool holds stay few: at most its cache's
// bytes over a MiB.
func TestSmallCodeStaysBytes(t *testing.T) {
	t.Parallel()
	a := newMemArtifacts(1 << 30)
	defer a.clear()
	small, large := make([]byte, minCodeFile-1), make([]byte, minCodeFile)
	_ = a.Put("small", small)
	_ = a.Put("large", large)
	for _, size := range []int{minCodeFile - 1, minCodeFile} {
		// As the disk cache gives it: in pieces, into a sink.
		s := &codeSink{min: a.minSize()}
		for _, piece := range [][]byte{make([]byte, size/2), make([]byte, size-size/2)} {
			if _, err := s.Write(piece); err != nil {
				t.Fatal(err)
			}
		}
		v, err := s.artifact("file" + strconv.Itoa(size))
		if err != nil {
			t.Fatal(err)
		}
		a.put(v)
	}
	for key, wantFile := range map[string]bool{"small": false, "large": true, "file" + strconv.Itoa(minCodeFile-1): false, "file" + strconv.Itoa(minCodeFile): true} {
		l, ok := a.Get(key)
		if !ok {
			t.Fatalf("%s: not kept", key)
		}
		if (l.file != nil) != wantFile || l.file == nil && len(l.code) != l.size {
			t.Errorf("%s: a memfd %v (%d bytes), want one: %v", key, l.file != nil, l.size, wantFile)
		}
		l.close()
	}
}

// TestWorkersLeaveNoDescriptor: workers that load code by descriptor,
// crash and are replaced, then shut down, leave the parent holding no
// descriptor it did not hold before: each worker's code channel closes
// when it is reaped, each load's duplicate of the memfd when the load
// ends, and the pool's memfds at Shutdown. (Not parallel: it counts this
// process's descriptors.)
func TestWorkersLeaveNoDescriptor(t *testing.T) {
	echo, trap := testkit.Component(t, "echo"), testkit.Component(t, "trap")
	// A pool's first call opens what stays open for the process (the
	// free-CPU rule's /proc/loadavg): opened before the count.
	warm := newPool(t, nil)
	call(t, warm, echo, `{"message":"hi"}`, lim)
	if err := warm.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	p, err := New(&Options{Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	p.mem.minFile = 0
	for i := range 6 {
		// A trap kills its worker; the next call loads the code again.
		tool := echo
		if i%2 == 1 {
			tool = trap
		}
		out := call(t, p, tool, `{"message":"hi"}`, lim)
		if (out.Failure == nil) != (tool == echo) {
			t.Fatalf("call %d of %s: %+v", i, tool, out)
		}
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after the pool's shutdown, %d before: %v", after, before, fdLinks())
	}
}

func fdLinks() []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"="+l)
	}
	return out
}

// TestCodeSinkWithoutMemfd: compiled code read from the disk cache is kept
// whole, as bytes, where no memfd can be made, and where one fails in the
// middle of the code (here its size sealed: writes past it fail), so a
// memfd that cannot be had never costs a compile. (Not parallel: it
// replaces memfd.)
func TestCodeSinkWithoutMemfd(t *testing.T) {
	code := make([]byte, 3*minCodeFile+5)
	for i := range code {
		code[i] = byte(i * 7)
	}
	defer func(m func() (*os.File, error)) { memfd = m }(memfd)
	for _, tc := range []struct {
		name  string
		memfd func() (*os.File, error)
	}{
		{"no memfd", func() (*os.File, error) { return nil, errors.New("memfd_create: too many open files") }},
		{"a memfd that fails past 2 MiB", func() (*os.File, error) {
			f, err := newMemfd()
			if err != nil {
				return nil, err
			}
			if err := f.Truncate(2 * minCodeFile); err != nil {
				return nil, err
			}
			if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_GROW); err != nil {
				return nil, err
			}
			return f, nil
		}},
	} {
		memfd = tc.memfd
		s := &codeSink{min: minCodeFile}
		for rest := code; len(rest) > 0; {
			n := min(len(rest), 100_000)
			if k, err := s.Write(rest[:n]); k != n || err != nil {
				t.Fatalf("%s: Write = %d, %v", tc.name, k, err)
			}
			rest = rest[n:]
		}
		v, err := s.artifact("k")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if v.file != nil || v.size != len(code) || !bytes.Equal(v.code, code) {
			t.Errorf("%s: kept a memfd %v, %d bytes, equal %v; want the code as bytes", tc.name, v.file != nil, len(v.code), bytes.Equal(v.code, code))
		}
	}
}

// TestArtifactFromDiskOnce: the pool reads an artifact the disk cache
// holds into memory once, a large one straight into a sealed memfd and a
// small one as bytes; one the cache does not hold is a miss.
func TestArtifactFromDiskOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	disk, err := compcache.Open(dir, "fp", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Pool{mem: newMemArtifacts(1 << 30), disk: disk}
	digestOf := func(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }
	defer p.mem.clear()
	large, small := bytes.Repeat([]byte{0xab}, minCodeFile+1), []byte("small code")
	for k, b := range map[string][]byte{"large": large, "small": small} {
		if err := disk.Put(digestOf(k), b); err != nil {
			t.Fatal(err)
		}
	}
	for k, b := range map[string][]byte{"large": large, "small": small} {
		l, ok := p.artifact(digestOf(k))
		if !ok {
			t.Fatalf("%s: not found", k)
		}
		got := l.code
		if l.file != nil {
			got = make([]byte, l.size)
			if _, err := l.file.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			seals, err := unix.FcntlInt(l.file.Fd(), unix.F_GET_SEALS, 0)
			if err != nil || seals&codeSeals != codeSeals {
				t.Errorf("%s: seals %#x, %v; want %#x", k, seals, err, codeSeals)
			}
		}
		l.close()
		if (l.file != nil) != (k == "large") || !bytes.Equal(got, b) {
			t.Errorf("%s: a memfd %v, equal %v", k, l.file != nil, bytes.Equal(got, b))
		}
		if _, ok := p.mem.Get(digestOf(k)); !ok {
			t.Errorf("%s: not kept in memory", k)
		}
	}
	if _, ok := p.artifact(digestOf("absent")); ok {
		t.Error("an artifact the disk cache does not hold was found")
	}
}
