//go:build linux

package confine

import (
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHelperNamespacesAreCloseOnExec (pass 51's defect): the network and user
// namespaces the helper hands back are held close-on-exec (as proxyNetns
// documents, and as the root path opens them), so no process maiden
// starts meanwhile (a worker, another helper, an unconfined child) inherits
// another run's namespaces.
func TestHelperNamespacesAreCloseOnExec(t *testing.T) {
	p, err := newHelperNetns(0)
	if err != nil {
		t.Skipf("no helper namespace here: %v", err)
	}
	defer p.Close()
	for name, fd := range map[string]int{"network namespace": p.fd(), "user namespace": p.userFd()} {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			t.Fatal(err)
		}
		if flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("the helper's %s is held on descriptor %d without close-on-exec (flags %#x): every process maiden execs while the run lasts inherits it", name, fd, flags)
		}
	}
	// What a process maiden starts meanwhile (os/exec, as a worker is)
	// holds.
	out, err := exec.Command("/bin/ls", "-l", "/proc/self/fd").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"net:[", "user:["} {
		if strings.Contains(string(out), ns) {
			t.Errorf("a process started by os/exec while the run lasts holds a %s...] descriptor:\n%s", ns, out)
		}
	}
}
