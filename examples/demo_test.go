package examples_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestDemo runs `make demo`, the README's first command, the way a
// newcomer does: in a copy of the repository holding only the files git
// tracks (no bin/, no built .wasm, as a fresh clone), with Go's and the JS
// toolchain's caches shared with this run. make demo is `make build` (go
// build -o bin/maiden ./cmd/maiden) then scripts/demo; the maiden command
// TestMain built stands in for the first step, since building it again in
// another directory recompiles every package (its cache keys hold the
// directory) for no more coverage.
func TestDemo(t *testing.T) {
	t.Parallel() // its own copy of the repository; the shared caches take concurrent writers
	// Two JS tools through componentize-js and three Go tools: a minute or
	// two, many more on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	clone := filepath.Join(t.TempDir(), "maiden")
	copyTracked(t, testkit.RepoRoot(t), clone)
	if err := os.MkdirAll(filepath.Join(clone, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, maidenBin, filepath.Join(clone, "bin", "maiden"), 0o755)

	cmd := exec.CommandContext(ctx, filepath.Join(clone, "scripts", "demo"))
	cmd.Dir = clone
	// On the deadline, kill the script's whole process group (maiden
	// build, node), not only bash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("scripts/demo: %.1fs", time.Since(start).Seconds())
	if err != nil {
		t.Fatalf("scripts/demo in a clean copy of the repository: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		// maiden build of each tool examples/agent.toml names, and nothing
		// else (examples/git holds no tool source).
		"== maiden build -o examples/hello/hello.wasm examples/hello/\n",
		"== maiden build -o examples/textkit/textkit.wasm examples/textkit/\n",
		// the calls' results
		`{"greeting":"Hello, newcomer!"}`,
		`{"message":"hi"}`,
		"\"path\":\"a[1].b\"}'\n42\n", // jq-lite's answer after its heading
		// the invalid input's exit code, printed by the script
		"(exit 2)\n",
		"Next: bin/maiden serve -config examples/agent.toml",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("scripts/demo's output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "examples/git") {
		t.Errorf("scripts/demo built examples/git, which holds no tool source")
	}
	if t.Failed() {
		t.Logf("scripts/demo printed:\n%s", out.String())
	}
}

// copyTracked copies the files git tracks in root (as they are in the work
// tree; a tracked file deleted there is left out) into dst.
func copyTracked(t *testing.T, root, dst string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s (the test copies the repository's tracked files): %v", root, err)
	}
	n := 0
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(root, filepath.FromSlash(rel))
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		copyFile(t, src, filepath.Join(dst, filepath.FromSlash(rel)), fi.Mode().Perm())
		n++
	}
	if n == 0 {
		t.Fatalf("git lists no files in %s", root)
	}
}

func copyFile(t *testing.T, src, dst string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatalf("copying %s: %v", src, err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
