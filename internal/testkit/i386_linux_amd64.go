package testkit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// i386ProbeEnv makes any binary that imports testkit (a test binary, a
// hostile program) make one i386 system call as it starts, and exit: 0
// when the kernel answered it. I386Syscalls runs its own executable so.
const i386ProbeEnv = "MAIDEN_TESTKIT_I386_PROBE"

func init() {
	if os.Getenv(i386ProbeEnv) != "1" {
		return
	}
	x, err := NewI386()
	if err != nil {
		os.Exit(3)
	}
	if x.Syscall(20) != int32(os.Getpid()) { // i386 getpid
		os.Exit(4)
	}
	os.Exit(0)
}

var i386Once struct {
	sync.Once
	err error
}

// I386Syscalls says why this kernel takes no i386 system calls from a
// 64-bit process (nil when it does). A kernel built without IA32
// emulation, or booted with ia32_emulation=0 (Linux 6.7 and later), faults
// on int 0x80 (SIGSEGV) before any system call is made: there is then
// nothing a seccomp filter could be asked, and the error wraps ErrNoI386,
// on which a test of one skips. Any other error (the page for the call not
// mapped, the copy not started, an answer that is not this pid) is not
// ErrNoI386. The question goes to a copy of the running executable (the
// fault would kill the asker), once a process.
func I386Syscalls() error {
	i386Once.Do(func() {
		if _, err := NewI386(); err != nil {
			i386Once.err = fmt.Errorf("no i386 entry here: %w", err)
			return
		}
		exe, err := os.Executable()
		if err != nil {
			i386Once.err = err
			return
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), i386ProbeEnv+"=1")
		out, err := cmd.CombinedOutput()
		switch {
		case err == nil:
		case bytes.Contains(out, []byte("signal SIGSEGV")):
			// Go's runtime reports a fault in code that is not Go's and
			// exits 2: the fault is the kernel's answer to int 0x80.
			i386Once.err = fmt.Errorf("%w: this kernel faults on int 0x80 (SIGSEGV) in a process with no filter (IA32 emulation off)", ErrNoI386)
		default:
			i386Once.err = fmt.Errorf("an i386 getpid in a process with no filter: %v: %.200s", err, out)
		}
	})
	return i386Once.err
}

// I386 makes 32-bit system calls (int 0x80) from a 64-bit process, as a
// hostile x86 program can: Linux answers them by the i386 numbering, where
// 102 is socketcall (64-bit getuid) and 11 is execve (64-bit munmap), so a
// seccomp filter that does not check seccomp_data.arch lets them through
// by the wrong names. The code and its data sit in one page below 2 GiB
// (MAP_32BIT: the i386 calls take 32-bit pointers).
type I386 struct {
	page []byte
	used int
}

// i386Data is where data starts in the page; the code is before it.
const i386Data = 256

// NewI386 maps the page.
func NewI386() (*I386, error) {
	page, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_32BIT)
	if err != nil {
		return nil, err
	}
	return &I386{page: page, used: i386Data}, nil
}

// Put copies b into the page and returns its 32-bit address.
func (x *I386) Put(b []byte) uint32 {
	x.used = (x.used + 7) &^ 7
	copy(x.page[x.used:], b)
	addr := x.addr(x.used)
	x.used += len(b)
	return addr
}

// Words puts 32-bit words (socketcall's argument block) into the page.
func (x *I386) Words(w ...uint32) uint32 {
	b := make([]byte, 4*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return x.Put(b)
}

func (x *I386) addr(off int) uint32 {
	return uint32(uintptr(unsafe.Pointer(&x.page[off])))
}

// Syscall makes i386 system call nr with up to five arguments (ebx, ecx,
// edx, esi, edi) and returns what the kernel answered (a negative errno on
// failure).
func (x *I386) Syscall(nr uint32, args ...uint32) int32 {
	var a [5]uint32
	copy(a[:], args)
	result := x.Words(0)
	code := []byte{0xb8} // mov eax, nr
	code = binary.LittleEndian.AppendUint32(code, nr)
	for i, op := range []byte{0xbb, 0xb9, 0xba, 0xbe, 0xbf} { // mov ebx/ecx/edx/esi/edi, imm32
		code = append(code, op)
		code = binary.LittleEndian.AppendUint32(code, a[i])
	}
	code = append(code, 0xcd, 0x80, 0x89, 0x04, 0x25) // int 0x80; mov [result], eax
	code = binary.LittleEndian.AppendUint32(code, result)
	code = append(code, 0xc3) // ret
	copy(x.page, code)
	// A Go func value is a pointer to a word holding the code's address.
	// The code touches only registers Go's ABI lets a callee clobber.
	fn := &struct{ pc uintptr }{uintptr(unsafe.Pointer(&x.page[0]))}
	call := *(*func())(unsafe.Pointer(&fn))
	call()
	return int32(binary.LittleEndian.Uint32(x.page[result-x.addr(0):]))
}

// Close unmaps the page.
func (x *I386) Close() error { return unix.Munmap(x.page) }

// CloneExit makes clone(2) with flags (and the caller's stack: no new
// one) from machine code whose child runs nothing but exit_group, so a
// process sharing the caller's memory (CLONE_VM without CLONE_VFORK) can be
// started safely. It returns clone's answer: the child's pid, or a
// negative errno. Its code page stays mapped: the child may not have run
// its exit yet when clone returns here.
func CloneExit(flags uint32) (int32, error) {
	x, err := NewI386()
	if err != nil {
		return 0, err
	}
	result := x.Words(0)
	code := []byte{0xb8, 56, 0, 0, 0, 0xbf} // mov eax, SYS_clone; mov edi, flags
	code = binary.LittleEndian.AppendUint32(code, flags)
	code = append(code,
		0x31, 0xf6, 0x31, 0xd2, 0x45, 0x31, 0xd2, 0x45, 0x31, 0xc0, // newsp, ptid, ctid, tls: 0
		0x0f, 0x05, // syscall
		0x85, 0xc0, 0x75, 0x09, // test eax, eax; jnz parent
		0xb8, 231, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05, // child: exit_group(0)
		0x89, 0x04, 0x25) // parent: mov [result], eax
	code = binary.LittleEndian.AppendUint32(code, result)
	code = append(code, 0xc3) // ret
	copy(x.page, code)
	fn := &struct{ pc uintptr }{uintptr(unsafe.Pointer(&x.page[0]))}
	call := *(*func())(unsafe.Pointer(&fn))
	call()
	return int32(binary.LittleEndian.Uint32(x.page[result-x.addr(0):])), nil
}
