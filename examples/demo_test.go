package examples_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDemo runs `make demo`, the README's first command, the way a
// newcomer does: in a copy of the repository holding only the files git
// tracks (no bin/, no built .wasm, as a fresh clone), with Go's and the JS
// toolchain's caches shared with this run. make demo is `make build` (go
// build -o bin/maiden ./cmd/maiden) then scripts/demo; the maiden command
// TestMain built stands in for the first step, since building it again in
// another directory recompiles every package (its cache keys hold the
// directory) for no more coverage. The run is shared (runDemo): the other
// tests call the tools it built.
func TestDemo(t *testing.T) {
	t.Parallel() // its own copy of the repository; the shared caches take concurrent writers
	d := runDemo()
	t.Logf("scripts/demo: %.1fs", d.took.Seconds())
	if d.err != nil {
		t.Fatalf("scripts/demo in a clean copy of the repository: %v\n%s", d.err, d.out)
	}
	for _, want := range []string{
		// maiden build of each tool examples/agent.toml names, and nothing
		// else (examples/git holds no tool source).
		"== maiden build -o examples/hello/hello.wasm examples/hello/\n",
		"== maiden build -o examples/textkit/textkit.wasm examples/textkit/\n",
		// the calls' results
		`{"greeting":"Hello, newcomer!"}`,
		"echo '{\"message\":\"hi\"}'\n{\"message\":\"hi\"}\n", // echo's answer after its heading, which holds the input too
		"\"path\":\"a[1].b\"}'\n42\n",                         // jq-lite's answer after its heading
		// the invalid input's exit code, printed by the script
		"(exit 2)\n",
		"Next: bin/maiden serve -config examples/agent.toml",
	} {
		if !strings.Contains(d.out, want) {
			t.Errorf("scripts/demo's output lacks %q", want)
		}
	}
	if strings.Contains(d.out, "examples/git") {
		t.Errorf("scripts/demo built examples/git, which holds no tool source")
	}
	if t.Failed() {
		t.Logf("scripts/demo printed:\n%s", d.out)
	}
}

// demoResult is one run of scripts/demo in a clean copy of the repository.
type demoResult struct {
	clone string // the copy's root
	out   string // stdout and stderr
	took  time.Duration
	err   error
}

// runDemo runs scripts/demo once per test binary. TestDemo checks what it
// printed; buildExample takes the tools it built (each with maiden build,
// from a clean copy: what the other tests want too), so an example is
// built once per run instead of once there and once more here.
var runDemo = sync.OnceValue(func() demoResult {
	// Two JS tools through componentize-js and three Go tools: a minute or
	// two, many more on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	clone := filepath.Join(work, "demo", "maiden")
	root, err := repoRoot()
	if err == nil {
		err = copyTracked(root, clone)
	}
	if err == nil {
		err = copyFile(maidenBin, filepath.Join(clone, "bin", "maiden"), 0o755)
	}
	if err != nil {
		return demoResult{clone: clone, err: err}
	}

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
	err = cmd.Run()
	return demoResult{clone: clone, out: out.String(), took: time.Since(start), err: err}
})

// repoRoot is the repository's root: go test runs in examples/.
func repoRoot() (string, error) { return filepath.Abs("..") }

// demoBuilt is what scripts/demo's `maiden build ... examples/NAME/` made:
// the component's path in the copy and its build's own time; ok is false
// if the demo did not build NAME (it builds what examples/agent.toml
// names) or failed before.
func demoBuilt(name string) (path string, took time.Duration, ok bool) {
	d := runDemo()
	head := regexp.MustCompile(`(?m)^== maiden build -o (examples/\S+) examples/` + regexp.QuoteMeta(name) + `/\n`)
	m := head.FindStringSubmatchIndex(d.out)
	if m == nil {
		return "", 0, false
	}
	path = filepath.Join(d.clone, filepath.FromSlash(d.out[m[2]:m[3]]))
	if _, err := os.Stat(path); err != nil {
		return "", 0, false
	}
	section := d.out[m[1]:]
	if i := strings.Index(section, "\n== "); i >= 0 {
		section = section[:i+1]
	}
	if w := wroteRE.FindStringSubmatch(section); w != nil {
		took, _ = time.ParseDuration(w[1])
	}
	return path, took, true
}

// copyTracked copies the files git tracks in root (as they are in the work
// tree; a tracked file deleted there is left out) into dst.
func copyTracked(root, dst string) error {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files in %s (the test copies the repository's tracked files): %v", root, err)
	}
	n := 0
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(root, filepath.FromSlash(rel))
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		if err := copyFile(src, filepath.Join(dst, filepath.FromSlash(rel)), fi.Mode().Perm()); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("git lists no files in %s", root)
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %v", src, err)
	}
	return out.Close()
}
