package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// TestCodeDescriptorsCloseOnExec: every descriptor of compiled code the
// parent holds is close-on-exec: the memfds (the pool's own and each load's
// duplicate) and both ends of a code channel. Inherited by every worker
// started after it, a memfd would give a worker another tool's code, and a
// channel's end would let one worker send descriptors into another's
// channel, to be loaded as its code.
func TestCodeDescriptorsCloseOnExec(t *testing.T) {
	t.Parallel()
	cloexec := func(what string, fd uintptr) {
		t.Helper()
		flags, err := unix.FcntlInt(fd, unix.F_GETFD, 0)
		if err != nil {
			t.Fatal(err)
		}
		if flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("%s: descriptor flags %#x, not close-on-exec (every worker started later inherits it)", what, flags)
		}
	}
	f, _, err := codeFileOf([]byte("compiled code"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cloexec("a code memfd", f.Fd())

	c, end, err := newCodeChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()
	defer c.close()
	cloexec("the parent's end of a code channel", uintptr(c.fd))
	cloexec("the worker's end of a code channel", end.Fd())

	a := newMemArtifacts(1 << 30)
	defer a.clear()
	a.minFile = 0
	_ = a.Put("k", []byte("compiled code"))
	l, ok := a.Get("k")
	if !ok || l.file == nil {
		t.Fatalf("the artifact: %+v, %v (want a memfd)", l, ok)
	}
	defer l.close()
	cloexec("a load's duplicate of the memfd", l.file.Fd())
}

// TestCodeFileOfAFailedFill: newCodeFile returns no memfd when what fills it
// fails (the disk cache refusing an entry whose bytes changed: LoadTo has
// written bytes that did not match), nor when the memfd cannot be sealed
// (here a writable shared mapping of it is left, so F_SEAL_WRITE is
// refused), and keeps no descriptor either way. (Not parallel: it counts
// this process's descriptors.)
func TestCodeFileOfAFailedFill(t *testing.T) {
	refused := errors.New("SHA-256 does not match")
	before := openFDs(t)
	f, _, err := newCodeFile(func(w io.Writer) error {
		if _, err := w.Write([]byte("bytes that did not match")); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) || f != nil {
		t.Errorf("newCodeFile of a fill that failed: %v, %v; want no file and the fill's error", f, err)
	}
	if f != nil {
		f.Close()
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after a failed fill, %d before", after, before)
	}

	var mapped []byte
	f, _, err = newCodeFile(func(w io.Writer) error {
		mf := w.(*os.File)
		if _, err := mf.Write(make([]byte, 4096)); err != nil {
			return err
		}
		m, err := unix.Mmap(int(mf.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		mapped = m
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "sealing compiled code") || f != nil {
		t.Errorf("newCodeFile of a memfd that cannot be sealed: %v, %v; want no file and the sealing's error", f, err)
	}
	if f != nil {
		f.Close()
	}
	if mapped != nil {
		_ = unix.Munmap(mapped)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after a failed seal, %d before", after, before)
	}
}

// TestChangedDiskArtifactNeverLoaded: an artifact in the disk cache whose
// bytes changed since maiden wrote it is refused, not kept in a memfd and
// handed to workers: the pool finds no code for it.
func TestChangedDiskArtifactNeverLoaded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := newPool(t, &Options{Size: 1, CacheDir: dir})
	tool, err := p.Open(context.Background(), testkit.Component(t, "echo"), lim)
	if err != nil {
		t.Fatal(err)
	}
	var arts []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".cwasm") {
			arts = append(arts, path)
		}
		return nil
	})
	if len(arts) != 1 {
		t.Fatalf("artifacts on disk: %q, want one", arts)
	}
	b, err := os.ReadFile(arts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(arts[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	p2 := newPool(t, &Options{Size: 1, CacheDir: dir})
	p2.mem.minFile = 0
	if l, ok := p2.artifact(tool.Digest); ok {
		l.close()
		t.Fatalf("the changed artifact was found (%d bytes, a memfd: %v); want it refused", l.size, l.file != nil)
	}
	if l, ok := p2.mem.Get(tool.Digest); ok {
		l.close()
		t.Fatal("the changed artifact is kept in memory")
	}
}

// TestChannelFullAtALoadKillsTheWorker: when the parent's send of the code
// finds the worker's channel full (descriptors it left unread), the load
// fails and the worker is killed as having broken the protocol, not kept
// to be handed the next call with its channel still full.
func TestChannelFullAtALoadKillsTheWorker(t *testing.T) {
	t.Parallel()
	good := newPool(t, nil)
	good.mem.minFile = 0 // the WAT echo in a memfd
	if _, err := good.Open(context.Background(), testkit.Component(t, "echo"), lim); err != nil {
		t.Fatal(err)
	}
	p := newPool(t, &Options{Size: 1})
	p.mem = good.mem
	p.setFingerprint(good.fingerprint)
	w, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.release(w, false)
	f, _, err := codeFileOf([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A worker reads its channel only for a load it was sent: until then
	// the parent's descriptors wait there, as a worker's it never took.
	for i := 0; ; i++ {
		if err := w.code.send(f); errors.Is(err, errChannelFull) {
			break
		} else if err != nil || i == 10000 {
			t.Fatalf("filling the channel, after %d: %v", i, err)
		}
	}
	err = p.ensureLoaded(context.Background(), w, firstKey(good))
	if !errors.Is(err, errChannelFull) {
		t.Fatalf("load into a full channel: %v, want errChannelFull", err)
	}
	select {
	case <-w.exited:
	case <-time.After(testkit.Slack(t, 10*time.Second)):
		t.Fatal("the worker whose channel was full is still running")
	}
	if r := w.killReason(); r != killedProtocol {
		t.Errorf("killed for %v, want a protocol violation", r)
	}
}

// TestReceiveCodeRefusesMore: the worker takes the descriptor only when
// the load frame's size is the file's, larger as well as smaller (mapped
// past the memfd's end, the code would fault the worker); a descriptor
// that is not a regular file is refused for that before it is mapped; and
// a worker whose environment named no code channel, or one of its standard
// descriptors, never receives on one. Each keeps no descriptor. (Not
// parallel: it counts this process's descriptors.)
func TestReceiveCodeRefusesMore(t *testing.T) {
	code, _, err := codeFileOf([]byte("twelve bytes"))
	if err != nil {
		t.Fatal(err)
	}
	defer code.Close()
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size == 0 {
		st.Size = 1 // receiveCode refuses size 0 before it receives
	}
	for _, tc := range []struct {
		name    string
		fd      int
		size    uint64
		channel int // -1: the socketpair's end
		want    string
	}{
		{"a larger size", int(code.Fd()), 13, -1, "12 bytes, want a file of 13"},
		{"a directory of the size asked", int(dir.Fd()), uint64(st.Size), -1, fmt.Sprintf("a descriptor of mode %#o", st.Mode)},
		{"no code channel", int(code.Fd()), 12, -2, "this worker has no code channel"},
		{"stdin as the channel", int(code.Fd()), 12, 0, "this worker has no code channel"},
		{"stderr as the channel", int(code.Fd()), 12, 2, "this worker has no code channel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			if err := unix.Sendmsg(fds[0], []byte{1}, unix.UnixRights(tc.fd), nil, 0); err != nil {
				t.Fatal(err)
			}
			channel := tc.channel
			switch channel {
			case -1:
				channel = fds[1]
			case -2:
				channel = childCodeFD() // none in a test's environment
			}
			before := openFDsOf(t, tc.fd)
			b, unmap, err := receiveCode(channel, tc.size)
			if err == nil {
				t.Errorf("receiveCode: %d bytes mapped, <nil>; want an error mentioning %q", len(b), tc.want)
				unmap()
			} else if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("receiveCode: %v, want an error mentioning %q", err, tc.want)
			}
			if after := openFDsOf(t, tc.fd); after != before {
				t.Errorf("%d descriptors open on the file sent after, %d before: one received was kept", after, before)
			}
		})
	}
}

// TestChildCodeFDAsTheFilterReadsIt: the worker takes its code channel's
// number from its environment as the seccomp filter does (env_fd in
// confine_linux.c: a decimal from 3 to 255), so recvmsg is never tried on
// a descriptor the filter does not let it read.
func TestChildCodeFDAsTheFilterReadsIt(t *testing.T) {
	for v, want := range map[string]int{
		"3": 3, "255": 255, "17": 17,
		"256": -1, "2": -1, "0": -1, "-1": -1, "": -1, "3x": -1, "x": -1, "99999999999999999999": -1,
	} {
		t.Setenv(envCode, v)
		if got := childCodeFD(); got != want {
			t.Errorf("childCodeFD with %s=%q: %d, want %d", envCode, v, got, want)
		}
	}
}

// TestReceivedCodeUnmapped: the mapping receiveCode makes is gone once its
// unmap is called: a worker loading code again and again keeps none of it
// mapped.
func TestReceivedCodeUnmapped(t *testing.T) {
	t.Parallel()
	code, _, err := codeFileOf(bytes.Repeat([]byte{0xcc}, 3*4096))
	if err != nil {
		t.Fatal(err)
	}
	defer code.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := unix.Sendmsg(fds[0], []byte{1}, unix.UnixRights(int(code.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	b, unmap, err := receiveCode(fds[1], 3*4096)
	if err != nil {
		t.Fatal(err)
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&b[0])))
	mapped := func() bool {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(maps), "\n") {
			if strings.HasPrefix(line, start) && strings.Contains(line, "memfd:maiden-code") {
				return true
			}
		}
		return false
	}
	if !mapped() {
		t.Fatalf("no mapping of the memfd at %s in /proc/self/maps", start)
	}
	unmap()
	if mapped() {
		t.Errorf("the code is still mapped at %s after unmap", start)
	}
}

// TestWorkerUnmapsLoadedCode: a worker that loaded code by descriptor keeps
// no mapping of the memfd once wasmtime copied the code out.
func TestWorkerUnmapsLoadedCode(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1})
	p.mem.minFile = 0
	call(t, p, testkit.Component(t, "echo"), `{"message":"hi"}`, lim)
	w, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.release(w, true)
	if len(w.loaded) != 1 {
		t.Fatalf("the worker holds %d artifacts, want the echo's", len(w.loaded))
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", w.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if strings.Contains(line, "memfd:maiden-code") {
			t.Errorf("the worker still maps the code it loaded: %s", line)
		}
	}
}

// TestCodeChannelCloseDuringSends: a worker's reap closes its code channel
// while a load may be sending on it; the close and the sends are
// serialised, so no send reaches the descriptor number after the close
// freed it (and something else, another worker's channel, may hold it).
// Under -race a close without the channel's lock is a data race.
func TestCodeChannelCloseDuringSends(t *testing.T) {
	t.Parallel()
	f, _, err := codeFileOf([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 50 {
		c, end, err := newCodeChannel()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			for {
				if err := c.send(f); err != nil {
					done <- err
					return
				}
			}
		}()
		c.close()
		if err := <-done; !errors.Is(err, os.ErrClosed) && !errors.Is(err, errChannelFull) {
			t.Errorf("a send as the channel closed: %v, want os.ErrClosed (or errChannelFull)", err)
		}
		end.Close()
	}
}
