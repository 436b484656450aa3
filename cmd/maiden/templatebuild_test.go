package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The JS templates' builds (componentize-js: 30-50 s of CPU each, minutes
// of a loaded machine) start in TestMain, before the first test, and run
// beside this package's other tests, which spend most of their time
// waiting for child processes. Run in their tests, the two of
// them added two to four minutes to the package, the slowest of make test.
// TestNewBuildCallJS/js and TestNewMiddlewareBuildCallJS/middleware-js
// check what these runs printed and built exactly as they checked their
// own.
//
// `maiden new` runs before the tests start (it reads isTerminal, which
// tests replace); only `maiden build` runs beside them, in process as
// before, with its compiled-code cache named (-cache, the user cache all
// the same) since a test may point HOME elsewhere meanwhile. The Go
// templates are built in their tests: they need GOPROXY=off in the
// environment, which only a test may set.
type templateBuild struct {
	work, dir        string
	newRes, buildRes cliResult
	took             time.Duration // maiden build's wall time
	done             chan struct{}
}

// templateBuilds holds the runs TestMain started, by template; written
// before the tests start, read only after.
var templateBuilds = map[string]*templateBuild{}

// backgroundTemplates names the templates built beside the tests: each
// template's project name and the test and subtest that check it.
var backgroundTemplates = []struct{ tmpl, name, test string }{
	{"js", "my-js-tool", "TestNewBuildCallJS"},
	{"middleware-js", "guard", "TestNewMiddlewareBuildCallJS"},
}

// startTemplateBuilds starts the builds of the templates whose tests -run
// selects, and returns a function that stops them (if a test never came
// to wait) and removes their directories.
func startTemplateBuilds() (stop func()) {
	if !flag.Parsed() {
		flag.Parse()
	}
	// Made only when a build is selected: the test binary also runs as
	// the child of tests that SIGKILL it (TestKillDuringGrants), whose
	// stop never runs, and each such child left an empty directory.
	var root string
	var rootErr error
	mkroot := func() (string, error) {
		if root == "" && rootErr == nil {
			root, rootErr = os.MkdirTemp("", "maiden-templates-")
		}
		return root, rootErr
	}
	cache, err := os.UserCacheDir()
	if err == nil {
		cache = filepath.Join(cache, "maiden", "components")
	} else {
		cache = "off"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	var started []*templateBuild
	for _, bt := range backgroundTemplates {
		if !runSelects(bt.test, bt.tmpl) {
			continue
		}
		root, err := mkroot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			break
		}
		b := &templateBuild{work: filepath.Join(root, bt.tmpl), done: make(chan struct{})}
		b.dir = filepath.Join(b.work, bt.name)
		if err := os.MkdirAll(b.work, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			continue
		}
		b.newRes = runCLI(ctx, "new", bt.tmpl, b.dir)
		templateBuilds[bt.tmpl] = b
		started = append(started, b)
		go func() {
			defer close(b.done)
			if b.newRes.code != exitOK {
				return
			}
			start := time.Now()
			b.buildRes = runCLI(ctx, "build", "-cache", cache, b.dir)
			b.took = time.Since(start)
		}()
	}
	return func() {
		cancel()
		for _, b := range started {
			<-b.done
		}
		if root != "" {
			os.RemoveAll(root)
		}
	}
}

// runCLI is cli without a test.
func runCLI(ctx context.Context, args ...string) cliResult {
	var out, errb bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &out, &errb)
	return cliResult{code, out.String(), errb.String()}
}

// runSelects reports whether go test's -run pattern may select test's
// subtest sub (-skip is ignored: a build it makes useless only costs time).
func runSelects(test, sub string) bool {
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return false // -list runs no test
	}
	f := flag.Lookup("test.run")
	return f == nil || patternSelects(f.Value.String(), test, sub)
}

// patternSelects reports whether the -run pattern may select test's
// subtest sub, as go test reads it: alternatives split at the top level's
// '|', each split at '/' into one pattern per level.
func patternSelects(pattern, test, sub string) bool {
	if pattern == "" {
		return true
	}
next:
	for _, alt := range splitTop(pattern, '|') {
		parts := splitTop(alt, '/')
		for i, name := range []string{test, sub} {
			if i >= len(parts) {
				break
			}
			if ok, err := regexp.MatchString(parts[i], name); err != nil || !ok {
				continue next
			}
		}
		return true
	}
	return false
}

// splitTop splits s at each sep outside brackets and parentheses.
func splitTop(s string, sep byte) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case c == sep && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// newAndBuild is `maiden new TMPL WORK/NAME` then `maiden build` of the
// project: work, the project's directory, what each printed and how long
// the build took. A template TestMain started is waited for; any other is
// run here, from a temporary directory of t.
func newAndBuild(t *testing.T, tmpl, name string) (work, dir string, newRes, buildRes cliResult, took time.Duration) {
	t.Helper()
	if b := templateBuilds[tmpl]; b != nil {
		<-b.done
		return b.work, b.dir, b.newRes, b.buildRes, b.took
	}
	work = t.TempDir()
	dir = filepath.Join(work, name)
	newRes = cli(t, "", "new", tmpl, dir)
	if newRes.code != exitOK {
		return work, dir, newRes, cliResult{}, 0
	}
	start := time.Now()
	buildRes = cli(t, "", "build", dir) // the user cache: the calls after reuse the compiled code
	return work, dir, newRes, buildRes, time.Since(start)
}

func TestPatternSelects(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		pattern string
		want    bool
	}{
		{"", true},
		{"TestNewBuildCall", true},
		{"TestNewBuildCall/js", true},
		{"TestNewBuildCall/go", false},
		{"^TestNewBuildCall$/^js$", true},
		{"TestNew", true},
		{"TestCheck", false},
		{"^$", false},
		{"TestCheck|TestNewBuildCall/js", true},
		{"TestNewBuildCall/go|TestCheck", false},
		{"TestNewBuildCall/(go|js)", true},
		{"TestNewBuildCall/[gj]s", true},
	} {
		if got := patternSelects(tt.pattern, "TestNewBuildCall", "js"); got != tt.want {
			t.Errorf("patternSelects(%q) = %v, want %v", tt.pattern, got, tt.want)
		}
	}
}
