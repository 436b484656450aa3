package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestIsTerminal: a real pseudo-terminal is a terminal; a pipe, a file and
// /dev/null (a character device, like a terminal) are not, so maiden new
// never waits for an answer nobody can give.
func TestIsTerminal(t *testing.T) {
	t.Parallel()
	_, pts := openPTY(t)
	if !isTerminal(pts) {
		t.Error("a pty is not a terminal")
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Create(t.TempDir() + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, f := range map[string]*os.File{"pipe": r, "/dev/null": null, "file": file} {
		if isTerminal(f) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
}

// openPTY opens a pseudo-terminal: the controlling side and the terminal.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

// TestNewPromptsOnARealTerminal runs maiden new (the maiden binary, maidenOnPath) on
// a pseudo-terminal, as a person would: it asks, and a typed "y" appends
// the tool to agent.toml.
func TestNewPromptsOnARealTerminal(t *testing.T) {
	t.Parallel()
	work, cfg, before := newWork(t, "\n")
	ptmx, pts := openPTY(t)
	env := maidenOnPath(t)
	var bin string
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			bin = filepath.Join(filepath.SplitList(p)[0], "maiden") // the last PATH= wins, as in exec
		}
	}
	cmd := exec.Command(bin, "new", "go", "greet")
	cmd.Env = env
	cmd.Dir = work
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var seen bytes.Buffer
	buf := make([]byte, 4096)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(seen.String(), "[Y/n]") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no prompt within 60s; the terminal shows:\n%s", seen.String())
		}
		ptmx.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := ptmx.Read(buf)
		seen.Write(buf[:n])
	}
	if _, err := ptmx.Write([]byte("y\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("maiden new: %v; the terminal shows:\n%s", err, seen.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("maiden new did not finish after the answer")
	}
	b, _ := os.ReadFile(cfg)
	if !strings.HasPrefix(string(b), before) || !strings.Contains(string(b), "[tools.greet]\npath = \"greet/greet.wasm\"") {
		t.Errorf("agent.toml:\n%s", b)
	}
}
