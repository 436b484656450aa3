package worker

import (
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The shared-memory floor: two bare Go processes share one page (a memfd
// both map) and hand a sequence number back and forth, each waiting for
// the other's number with FUTEX_WAIT and waking it with FUTEX_WAKE. It is
// what a shared-memory ring between the parent and a worker could cost at
// best on this machine: the same two cross-process wake-ups as a socket,
// without the socket. The -spin variant first polls the word for up to
// futexSpin before sleeping (adaptive spinning), which wins only when the
// other process has a CPU of its own.
//
// Layout of the page: word 0 is the ping's sequence number, word 1 the
// pong's.

// futexSpin is how long a -spin waiter polls before sleeping.
const futexSpin = 50 * time.Microsecond

// The futex operations (linux/futex.h; x/sys/unix does not name them).
const (
	futexWaitOp = 0
	futexWakeOp = 1
)

func futexWord(mem []byte, i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&mem[4*i]))
}

// futexWait waits until *w is no longer old, polling first if spin > 0.
func futexWait(w *uint32, old uint32, spin time.Duration) {
	if spin > 0 {
		until := time.Now().Add(spin)
		for i := 0; atomic.LoadUint32(w) == old; i++ {
			if i&63 == 63 && time.Now().After(until) {
				break
			}
		}
	}
	for atomic.LoadUint32(w) == old {
		// Not FUTEX_PRIVATE_FLAG: the word is shared between processes.
		_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(old), 0, 0, 0)
	}
}

func futexSet(w *uint32, v uint32) {
	atomic.StoreUint32(w, v)
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, 1, 0, 0, 0)
}

// futexPongMain answers every ping on the page mapped from fd 3 until the
// ping's word is 0 (the end).
func futexPongMain(spin time.Duration) int {
	mem, err := unix.Mmap(3, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return 2
	}
	runtime.LockOSThread()
	ping, pong := futexWord(mem, 0), futexWord(mem, 1)
	seen := uint32(0)
	for {
		futexWait(ping, seen, spin)
		seen = atomic.LoadUint32(ping)
		if seen == ^uint32(0) {
			return 0
		}
		futexSet(pong, seen)
	}
}

// futexSetup starts one futex pong process; a round trip is one ping and
// its pong.
func futexSetup(spin time.Duration) func(b *testing.B) (func() error, func()) {
	return func(b *testing.B) (func() error, func()) {
		fd, err := unix.MemfdCreate("maiden-bench-futex", unix.MFD_CLOEXEC)
		if err != nil {
			b.Fatal(err)
		}
		if err := unix.Ftruncate(fd, 4096); err != nil {
			b.Fatal(err)
		}
		mem, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			b.Fatal(err)
		}
		f := os.NewFile(uintptr(fd), "futex")
		mode := "futex"
		if spin > 0 {
			mode = "futex-spin"
		}
		cmd := exec.Command(mustExe(b))
		cmd.Env = []string{envPong + "=" + mode}
		cmd.ExtraFiles = []*os.File{f}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		addOther(cmd.Process.Pid)
		ping, pong := futexWord(mem, 0), futexWord(mem, 1)
		seq := uint32(0)
		op := func() error {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			seq++
			futexSet(ping, seq)
			futexWait(pong, seq-1, spin)
			return nil
		}
		return op, func() {
			futexSet(ping, ^uint32(0))
			_ = cmd.Wait()
			_ = unix.Munmap(mem)
		}
	}
}
