//go:build linux

package confine_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/testkit"
)

// startCmd starts this test binary in mode m through StartCmd and returns
// its stdout.
func startCmd(t *testing.T, m string, s confine.Spec, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(self(t), args...)
	cmd.Env = []string{modeEnv + "=" + m}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	st, err := confine.StartCmd(cmd, s)
	if err != nil {
		t.Fatal(err)
	}
	if st.Landlock < 4 || st.Unconfined {
		t.Fatalf("not confined: %+v", st)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, in, bufio.NewReader(out)
}

// A long-running confined process over pipes (as a stdio MCP upstream
// is): it answers on its pipes, and it cannot read outside its paths.
func TestStartCmdConfinesALongRunningProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("s3cret"), 0o644)
	cmd, in, out := startCmd(t, "serve", confine.Spec{})
	for _, req := range []string{"read " + secret, "read /etc/passwd", "connect 127.0.0.1:1", "env"} {
		if _, err := io.WriteString(in, req+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		line = strings.TrimSpace(line)
		if req == "env" {
			if line != modeEnv+"=serve" {
				t.Fatalf("environment %q", line)
			}
			continue
		}
		if !strings.HasPrefix(line, "refused: ") {
			t.Fatalf("%s: %q, want a refusal", req, line)
		}
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("wait: %v", err)
	}
}

// The control: the same request for a declared path is answered.
func TestStartCmdAllowsDeclaredPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	os.WriteFile(f, []byte("x"), 0o644)
	_, in, out := startCmd(t, "serve", confine.Spec{ReadOnly: []string{dir}})
	io.WriteString(in, "read "+f+"\n")
	if line, _ := out.ReadString('\n'); strings.TrimSpace(line) != "ok" {
		t.Fatalf("declared path: %q", line)
	}
}

func TestStartCmdRefusesBadCommands(t *testing.T) {
	t.Parallel()
	c := exec.Command("relative-name-that-does-not-exist")
	if _, err := confine.StartCmd(c, confine.Spec{}); err == nil {
		t.Fatal("a command that was not found started")
	}
	c = exec.Command(self(t))
	c.ExtraFiles = []*os.File{os.Stdin}
	if _, err := confine.StartCmd(c, confine.Spec{}); err == nil {
		t.Fatal("a command with ExtraFiles started")
	}
}

// TestStartCmdOutlivesTheThreadThatStartedIt: a confined process (a stdio
// MCP upstream, a wrapped CLI in a call) dies with maiden (Pdeathsig
// SIGKILL), but not with the goroutine's thread that started it: Go ends a
// thread whose locked goroutine returns, and Linux sends Pdeathsig when
// the forking thread ends (internal/childproc forks from a thread that
// never does).
func TestStartCmdOutlivesTheThreadThatStartedIt(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(self(t))
	cmd.Env = []string{modeEnv + "=serve"}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	testkit.OnEndingThread(t, func() { _, err = confine.StartCmd(cmd, confine.Spec{}) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	io.WriteString(in, "env\n")
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != modeEnv+"=serve" {
		t.Fatalf("the confined process, after the thread that started it ended: %q, %v", line, err)
	}
}
