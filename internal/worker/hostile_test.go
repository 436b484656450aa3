package worker

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hostileWorker behaves as a compromised worker would, for the tests that
// check the parent survives it.
func hostileWorker(mode string) int {
	conn := os.NewFile(ipcFD, "ipc")
	r := bufio.NewReader(conn)
	write := func(b []byte) { _, _ = conn.Write(b) }
	write(hello{Version: protocolVersion, Fingerprint: "hostile", Confinement: "none"}.encode())
	for {
		typ, p, err := readFrame(r, maxFrame)
		if err != nil {
			return 0
		}
		switch typ {
		case msgLoad:
			m, _ := decodeLoad(p)
			write(loadedMsg{Digest: m.Digest}.encode())
		case msgCompile:
			if mode == "hostile-crash-on-compile" {
				// As cranelift's panic would: abort the process.
				_ = unix.Kill(os.Getpid(), unix.SIGABRT)
				time.Sleep(time.Second)
			}
			return 1
		case msgRun:
			m, _ := decodeRun(p)
			switch mode {
			case "hostile-garbage":
				write([]byte{0, 0, 0, 5, 67, 1, 2, 3, 4})
			case "hostile-huge-frame":
				write([]byte{0xff, 0xff, 0xff, 0xff, 67})
			case "hostile-wrong-id":
				write(doneMsg{ID: m.ID + 7, Output: "forged"}.encode())
			case "hostile-flood-logs":
				line := make([]byte, 60000)
				for i := range line {
					line[i] = 'x'
				}
				for i := 0; i < 200; i++ {
					write(logMsg{ID: m.ID, Level: "info", Source: "log", Message: string(line)}.encode())
				}
				write(doneMsg{ID: m.ID, FailKind: "tool", FailMessage: "flooded"}.encode())
			case "hostile-silent":
				// Never answers: the deadline kill must end the call.
			case "hostile-reveal-twice":
				// A tool is one thread: a second reveal before the first
				// answer cannot come from a sandbox.
				write(revealMsg{ID: m.ID, Handle: "a"}.encode())
				write(revealMsg{ID: m.ID, Handle: "b"}.encode())
			case "hostile-reveal-wrong-id":
				write(revealMsg{ID: m.ID + 1, Handle: "a"}.encode())
			case "hostile-reveal-huge":
				write(revealMsg{ID: m.ID, Handle: strings.Repeat("h", 1<<20)}.encode())
			}
		}
	}
}

// confineProbe tries what a confined worker must not be able to do and
// prints one line per attempt.
func confineProbe() int {
	report := func(what string, err error) {
		if err != nil {
			fmt.Printf("DENIED %s: %v\n", what, err)
		} else {
			fmt.Printf("ALLOWED %s\n", what)
		}
	}
	if msg := confinementError(); msg != "" {
		fmt.Printf("ALLOWED confinement failed: %s\n", msg)
	}
	fmt.Printf("NOTE %s\n", confinementNote())
	f, err := os.Open("/etc/hostname")
	if err == nil {
		f.Close()
	}
	report("open /etc/hostname", err)
	_, err = os.ReadDir("/")
	report("open / for listing", err)
	err = os.WriteFile("/tmp/maiden-probe", []byte("x"), 0o600)
	report("open /tmp for writing", err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err == nil {
		l.Close()
	}
	report("socket (listen on loopback)", err)
	_, err = syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Files: []uintptr{0, 1, 2}})
	report("fork and exec /bin/true", err)
	var rl unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_DATA, &rl)
	err = unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: rl.Max, Max: rl.Max})
	report("raise its own RLIMIT_DATA", err)
	_, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	report("socket(AF_UNIX)", err)
	// Last: if execve worked, this process would become /bin/true and the
	// test would miss this line.
	err = unix.Exec("/bin/true", []string{"true"}, nil)
	report("exec /bin/true", err)
	return 0
}
