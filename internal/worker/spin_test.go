package worker

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair gives the worker's end of a socketpair as the worker holds it
// (blocking, an *os.File) and the parent's as a descriptor. (The tests that
// close the parent's end themselves are not parallel: the cleanup closes
// that number again, which another test's file may hold by then.)
func socketPair(t testing.TB) (*os.File, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "worker-end")
	t.Cleanup(func() { f.Close(); unix.Close(fds[1]) })
	return f, fds[1]
}

// TestSpinReaderAttempt: one attempt of the worker's spinning read on its
// blocking socket finds nothing without waiting, finds a frame, and sees
// the parent's end closed, both through preadv2 with RWF_NOWAIT (which this
// kernel takes on a socket: the fast path must be the one that runs here)
// and through the ppoll-then-read fallback of a kernel that does not.
func TestSpinReaderAttempt(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		name := "preadv2-nowait"
		if fallback {
			name = "ppoll-then-read"
		}
		t.Run(name, func(t *testing.T) {
			f, peer := socketPair(t)
			r := newSpinReader(f)
			r.noNowait = fallback
			buf := make([]byte, 64)
			attempt := func() (int, error) {
				r.buf = buf
				if err := r.rc.Read(r.attempt); err != nil {
					t.Fatal(err)
				}
				r.buf = nil
				return r.n, r.err
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if n, err := attempt(); n != 0 || !errors.Is(err, syscall.EAGAIN) {
					t.Errorf("an attempt on an empty socket: %d, %v; want 0, EAGAIN", n, err)
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("an attempt on an empty socket waited")
			}
			if r.noNowait != fallback {
				t.Fatalf("noNowait = %v after an attempt: this kernel refused preadv2's RWF_NOWAIT on a socket", r.noNowait)
			}
			if _, err := unix.Write(peer, []byte("frame")); err != nil {
				t.Fatal(err)
			}
			if n, err := attempt(); err != nil || string(buf[:n]) != "frame" {
				t.Fatalf("an attempt with a frame waiting: %q, %v", buf[:n], err)
			}
			unix.Close(peer)
			if n, err := attempt(); n != 0 || err != nil {
				t.Fatalf("an attempt after the parent's end closed: %d, %v; want 0, nil (the end)", n, err)
			}
		})
	}
}

// TestSpinReaderReadsAcrossTheSpin: Read spins, finds nothing, and then
// gets the frame written while it spins or once it sleeps; the end after
// that is io.EOF.
func TestSpinReaderReadsAcrossTheSpin(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Millisecond, time.Hour} {
		f, peer := socketPair(t)
		r := newSpinReader(f)
		r.spinFor(spin)
		go func() {
			time.Sleep(5 * time.Millisecond) // a frame that comes late; no assertion waits on this
			unix.Write(peer, []byte("late"))
			unix.Close(peer)
		}()
		got, err := io.ReadAll(r)
		if err != nil || string(got) != "late" {
			t.Fatalf("spin %v: read %q, %v", spin, got, err)
		}
	}
}

// TestFilePreadReadsFromTheStart: filePread reads a file's content from
// its start every time, in one read, and refuses a closed file.
func TestFilePreadReadsFromTheStart(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "usage")
	if err := os.WriteFile(p, []byte("3792896\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newFilePread(f)
	if err != nil {
		t.Fatal(err)
	}
	var buf [32]byte
	for i := range 3 {
		n, err := r.read(buf[:])
		if err != nil || string(buf[:n]) != "3792896\n" {
			t.Fatalf("read %d: %q, %v", i, buf[:n], err)
		}
	}
	f.Close()
	if n, err := r.read(buf[:]); n != 0 || !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read of a closed file: %d, %v; want os.ErrClosed", n, err)
	}
}
