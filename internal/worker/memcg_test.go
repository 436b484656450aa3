package worker

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// envMemcgHog makes this test binary a process that takes and lets go of
// memory on command (memcgHogMain), for TestMemcgLimitFollowsUsageAtEachCall.
const envMemcgHog = "MAIDEN_TEST_MEMCG_HOG"

// memcgHogMain reads commands on stdin: "grow N" maps and touches N MiB
// more, "free" unmaps all of it, "ready" does nothing (the process has
// started: its runtime's and binary's pages are charged); each is
// answered "ok" once done.
func memcgHogMain() int {
	var held [][]byte
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 2 && f[0] == "grow":
			n, _ := strconv.Atoi(f[1])
			b, err := unix.Mmap(-1, 0, n<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
			if err != nil {
				fmt.Println("mmap:", err)
				return 1
			}
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			held = append(held, b)
		case len(f) == 1 && f[0] == "ready":
		case len(f) == 1 && f[0] == "free":
			for _, b := range held {
				_ = unix.Munmap(b)
			}
			held = nil
		default:
			fmt.Println("unknown command", in.Text())
			return 1
		}
		fmt.Println("ok")
	}
	return 0
}

// startMemcgHog starts this test binary as a memcgHogMain process in a
// memory cgroup of its own (joinMemcg): the process, its stdin, a scanner
// of its answers and its cgroup. The test's cleanup kills it and leaves
// the cgroup.
func startMemcgHog(t *testing.T) (*exec.Cmd, io.Writer, *bufio.Scanner, *memcg) {
	t.Helper()
	cmd := exec.Command(mustExe(t))
	cmd.Env = append(os.Environ(), envMemcgHog+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := joinMemcg(cmd.Process.Pid)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if m != nil {
			m.leave()
		}
	})
	if m == nil {
		t.Fatal("the process did not get a memory cgroup")
	}
	return cmd, stdin, bufio.NewScanner(stdout), m
}

// TestMemcgLimitFollowsUsageAtEachCall: the memory cgroup's limit set for
// a call is the worker's usage at that call plus the call's headroom and
// memcgSlack (give or take memcgTolerance), whatever the worker did while
// idle. A worker that held 48 MiB at one call and let it go before the
// next gets no more at the next than its usage then allows: a limit made
// from a usage read earlier (when the worker went idle, or every N calls)
// would hand the next call what the worker let go on top of its headroom.
func TestMemcgLimitFollowsUsageAtEachCall(t *testing.T) {
	t.Parallel()
	if _, err := memcgRoot(); err != nil {
		t.Skipf("no memory cgroup for workers here: %v", err)
	}
	_, stdin, out, m := startMemcgHog(t)
	do := func(c string) {
		t.Helper()
		if _, err := fmt.Fprintln(stdin, c); err != nil {
			t.Fatal(err)
		}
		if !out.Scan() || out.Text() != "ok" {
			t.Fatalf("%s: the process answered %q (%v)", c, out.Text(), out.Err())
		}
	}
	read := func(name string) uint64 {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(m.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const headroom = 32 << 20
	// A few pages of the process's runtime, and per-CPU charge batches,
	// move between the limit being set and the usage read here.
	const wobble = 1 << 20
	call := func(when string) {
		t.Helper()
		if err := m.setLimit(headroom); err != nil {
			t.Fatal(err)
		}
		limit, usage := read("memory.limit_in_bytes"), read("memory.usage_in_bytes")
		if want := usage + headroom + memcgSlack; limit > want+memcgTolerance+wobble {
			t.Errorf("%s: limit %d MiB over the usage at the call (%d MiB) plus headroom and slack (%d MiB): %d MiB more than memcgTolerance allows",
				when, limit>>20, usage>>20, (headroom+memcgSlack)>>20, (limit-want-memcgTolerance)>>20)
		} else if limit+wobble < want {
			t.Errorf("%s: limit %d MiB leaves less than the headroom and slack above the usage at the call (%d MiB)", when, limit>>20, usage>>20)
		}
	}
	// Not before the process has started: until then its start-up (the
	// runtime, the pages of the binary it faults in) is charged while the
	// limit is set, and "at rest" read 5 MiB more usage than the limit
	// was made from in a loaded full run.
	do("ready")
	call("at rest")
	do("grow 48")
	call("holding 48 MiB")
	do("free")
	call("after letting 48 MiB go while idle")
	do("grow 8")
	call("holding 8 MiB")
	do("grow 16")
	call("holding 24 MiB")
	do("free")
	call("after letting 24 MiB go while idle")
}
