package worker

import (
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkSystemCall measures what a system call costs on this machine,
// and the two per-call reads that went from two calls to one, in one run
// (bench/README.md, "System calls"):
//
//   - getppid: the cheapest call there is, the floor of any of them.
//   - loadavg-readat, loadavg-pread: /proc/loadavg read from its start by
//     os.File.ReadAt (which reads on to the end: two calls) and by
//     filePread (one), as the parent reads it for the free-CPU rule and a
//     worker's cgroup usage at every call.
//   - frame-ppoll-read, frame-preadv2: a 64-byte frame written to a
//     socketpair and read back by the worker's spinning attempt, the old
//     way (ppoll with no timeout, then read) and with preadv2's
//     RWF_NOWAIT (spinReader.readOnce).
//
// Run:
//
//	go test ./internal/worker -run '^$' -bench '^BenchmarkSystemCall$' -count 5
func BenchmarkSystemCall(b *testing.B) {
	b.Run("getppid", func(b *testing.B) {
		for b.Loop() {
			syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0)
		}
	})
	load := func(b *testing.B) *os.File {
		f, err := os.Open("/proc/loadavg")
		if err != nil {
			b.Skip(err)
		}
		b.Cleanup(func() { f.Close() })
		return f
	}
	b.Run("loadavg-readat", func(b *testing.B) {
		f := load(b)
		var buf [128]byte
		for b.Loop() {
			if n, _ := f.ReadAt(buf[:], 0); n == 0 {
				b.Fatal("empty read")
			}
		}
	})
	b.Run("loadavg-pread", func(b *testing.B) {
		r, err := newFilePread(load(b))
		if err != nil {
			b.Fatal(err)
		}
		var buf [128]byte
		for b.Loop() {
			if n, err := r.read(buf[:]); n == 0 {
				b.Fatal("empty read", err)
			}
		}
	})
	for _, fallback := range []bool{true, false} {
		name := "frame-preadv2"
		if fallback {
			name = "frame-ppoll-read"
		}
		b.Run(name, func(b *testing.B) {
			f, peer := socketPair(b)
			r := newSpinReader(f)
			r.noNowait = fallback
			frame := make([]byte, 64)
			buf := make([]byte, 4096)
			for b.Loop() {
				if _, err := unix.Write(peer, frame); err != nil {
					b.Fatal(err)
				}
				r.buf = buf
				if err := r.rc.Read(r.attempt); err != nil || r.n != len(frame) {
					b.Fatalf("attempt: %d, %v, %v", r.n, r.err, err)
				}
			}
			r.buf = nil
			if r.noNowait != fallback {
				b.Fatal("this kernel refused preadv2's RWF_NOWAIT on a socket")
			}
		})
	}
}
