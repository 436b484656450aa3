// Package examples_test builds every example tool with the maiden command,
// from a clean state, and calls it: `maiden build` then `maiden call` for
// echo (Go) and jq-lite (JavaScript), and the embedding API for weather
// (Go), whose test needs a loopback TLS server and a resolver that sends
// api.weather.example to it. The benchmarks measure per-call latency next to
// the tiny WAT echo, cold starts and template builds; run them with
//
//	go test ./examples -run '^$' -bench . -benchtime 20x
package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

var (
	work      string // removed after the run
	compiled  string // maiden's default compiled-code cache (cacheDir)
	maidenBin string // the maiden command, built from ../cmd/maiden (shared: do not modify)
)

// TestMain builds the maiden command once: the examples are built and
// called through it exactly as a user would.
func TestMain(m *testing.M) {
	var err error
	work, err = os.MkdirTemp("", "maiden-examples-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Shared with the other test binaries of the run (testkit.Binary).
	maidenBin, err = testkit.BuildBinary("./cmd/maiden")
	if err == nil {
		// maiden's default (os.UserCacheDir()/maiden/components), which
		// scripts/demo's commands use: see cacheDir.
		compiled, err = os.UserCacheDir()
		compiled = filepath.Join(compiled, "maiden", "components")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "examples: %v\n", err)
		os.RemoveAll(work)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(work)
	os.Exit(code)
}

type cmdResult struct {
	code           int
	stdout, stderr string
}

// maidenCmd runs the maiden command in this directory (examples/).
func maidenCmd(ctx context.Context, args ...string) cmdResult {
	cmd := exec.CommandContext(ctx, maidenBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return cmdResult{code, stdout.String(), stderr.String()}
}

// built is an example's component, built once per run into work/NAME/ by
// `maiden build -o` (never the file beside the sources, which may be stale):
// the one scripts/demo built in its clean copy of the repository (runDemo),
// else, for an example the demo does not build or if it failed, built here.
type buildResult struct {
	path  string
	took  time.Duration // toolbuild's own time, from "wrote ... in D"
	size  int64
	err   error
	trace string
}

var builds sync.Map // name -> func() buildResult

// logOnce runs a function once per key.
var logOnce onceMap

type onceMap struct{ m sync.Map }

func (o *onceMap) Do(key string, f func()) {
	once, _ := o.m.LoadOrStore(key, new(sync.Once))
	once.(*sync.Once).Do(f)
}

var wroteRE = regexp.MustCompile(`wrote .* in (\S+)\n`)

func buildExample(name string) buildResult {
	f, _ := builds.LoadOrStore(name, sync.OnceValue(func() buildResult {
		out := filepath.Join(work, name, name+".wasm")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return buildResult{err: err}
		}
		if path, took, ok := demoBuilt(name); ok {
			res := buildResult{path: out, took: took, trace: "built by scripts/demo"}
			if err := os.Link(path, out); err != nil {
				return buildResult{err: err}
			}
			if fi, err := os.Stat(out); err == nil {
				res.size = fi.Size()
			}
			return res
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// The shared compiled-code cache: the build compiles the component
		// to describe it, and the calls below then find that compilation.
		r := maidenCmd(ctx, "build", "-cache", cacheDir(), "-o", out, name)
		if r.code != 0 {
			return buildResult{err: fmt.Errorf("maiden build %s: exit %d (needs Go >= 1.24 and Node.js >= 20 with npm)", name, r.code), trace: r.stderr}
		}
		res := buildResult{path: out, trace: r.stderr}
		if m := wroteRE.FindStringSubmatch(r.stderr); m != nil {
			res.took, _ = time.ParseDuration(m[1])
		}
		if fi, err := os.Stat(out); err == nil {
			res.size = fi.Size()
		}
		return res
	}))
	return f.(func() buildResult)()
}

func built(t testing.TB, name string) string {
	t.Helper()
	r := buildExample(name)
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.trace)
	}
	logOnce.Do(name, func() { t.Logf("%s: %.2f MB, built in %v", name, float64(r.size)/1e6, r.took) })
	return r.path
}

// exampleConfig is examples/agent.toml copied next to the built components,
// so that its relative paths (echo/echo.wasm, ...) find them. Loading it
// checks that every tool's file exists, so it builds them all. The copy is
// written once per run: tests run in parallel, and a second WriteFile
// truncating the file while another test's maiden read it made that load
// fail (maiden help then said "unknown command": TestTextkit in a full run).
func exampleConfig(t testing.TB) string {
	t.Helper()
	p, err := writeExampleConfig()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var writeExampleConfig = sync.OnceValues(func() (string, error) {
	entries, err := os.ReadDir(".")
	if err != nil {
		return "", err
	}
	var wg sync.WaitGroup
	for _, e := range entries {
		if e.IsDir() && toolProject(e.Name()) {
			wg.Go(func() { buildExample(e.Name()) })
		}
	}
	wg.Wait()
	for _, e := range entries {
		if !e.IsDir() || !toolProject(e.Name()) {
			continue
		}
		if r := buildExample(e.Name()); r.err != nil {
			return "", fmt.Errorf("%v\n%s", r.err, r.trace)
		}
	}
	b, err := os.ReadFile("agent.toml")
	if err != nil {
		return "", err
	}
	p := filepath.Join(work, "agent.toml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return "", err
	}
	return p, nil
})

// toolProject reports whether dir holds a tool's source (examples/git is a
// wrapped CLI's description, not a tool).
func toolProject(dir string) bool {
	for _, f := range []string{"go.mod", "index.js", "tool.wat"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(m) > 0
}

// TestGitExample runs the worked example of a wrapped CLI
// (examples/git/agent.toml) through the maiden command: git log with a
// count runs (confined), status is denied by the card, push is not
// expressible.
func TestGitExample(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The example's files, as they are, two levels down in a scratch
	// repository (their dir and read_paths are "../..").
	repo := t.TempDir()
	gitIn := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitIn("init", "-q")
	ex := filepath.Join(repo, "examples", "git")
	if err := os.MkdirAll(ex, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"agent.toml", "git.command.json"} {
		b, err := os.ReadFile(filepath.Join("git", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ex, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn("add", ".")
	gitIn("commit", "-q", "-m", "the example")
	cfg := filepath.Join(ex, "agent.toml")
	if r := maidenCmd(ctx, "check", "-config", cfg, "-state", filepath.Join(t.TempDir(), "state.db")); r.code != 0 {
		t.Fatalf("maiden check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	state := filepath.Join(t.TempDir(), "state.db")
	for _, tc := range []struct {
		in   string
		code int
		want string
	}{
		{`{"command":"log","max-count":1}`, 0, "commit "},
		{`{"command":"status"}`, 6, "no card"},
		{`{"command":"push"}`, 2, "push"},
	} {
		r := maidenCmd(ctx, "call", "-config", cfg, "-state", state, "-agent", "reader", "git", tc.in)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
			t.Errorf("git %s: exit %d, want %d containing %q\n%s%s", tc.in, r.code, tc.code, tc.want, r.stdout, r.stderr)
		}
	}
}

// cacheDir is the compiled-component cache the maiden commands share (keyed
// by content and engine, safe for concurrent writers), so that each example
// is compiled once, not once per command and run (a JS tool takes 10-30 s of
// CPU): maiden's default one, where scripts/demo's maiden build and calls
// (runDemo) compile the tools the tests then call.
func cacheDir() string { return compiled }

func call(t *testing.T, tool, input string) cmdResult {
	t.Helper()
	cfg := exampleConfig(t) // builds every example first: the deadline is the call's
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return maidenCmd(ctx, "call", "-config", cfg, "-cache", cacheDir(), tool, input)
}

// TestExampleConfig checks examples/agent.toml with every example built:
// the file is valid and every tool loads.
func TestExampleConfig(t *testing.T) {
	t.Parallel()
	r := maidenCmd(context.Background(), "check", "-config", exampleConfig(t), "-cache", cacheDir())
	if r.code != 0 {
		t.Fatalf("maiden check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("%s", r.stdout)
}

func TestEcho(t *testing.T) {
	t.Parallel()
	built(t, "echo")
	for _, in := range []string{`{"message":"hi"}`, `{"message":"héllo ✓","extra":[1,2,3]}`} {
		r := call(t, "echo", in)
		if r.code != 0 || r.stdout != in+"\n" {
			t.Errorf("echo %s: exit %d, stdout %q, stderr %q", in, r.code, r.stdout, r.stderr)
		}
	}
}

func TestJQLite(t *testing.T) {
	t.Parallel()
	built(t, "jq-lite")
	data := `{"a":{"b":[{"c":42},{"c":"x"}]},"odd key":[true]}`
	for _, tt := range []struct {
		path, out string
		code      int
		stderr    string
	}{
		{"a.b[0].c", "42", 0, ""},
		{".a.b[-1]", `{"c":"x"}`, 0, ""},
		{`["odd key"][0]`, "true", 0, ""},
		{"a.missing", "null", 0, ""},
		{".", data, 0, ""},
		{"a.b.c", "", 1, "cannot index array with \"c\""},
		{"a..b", "", 1, "bad path"},
	} {
		r := call(t, "jq-lite", fmt.Sprintf(`{"data":%s,"path":%q}`, data, tt.path))
		if r.code != tt.code || strings.TrimSpace(r.stdout) != tt.out || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("path %q: exit %d, stdout %q, stderr %q; want exit %d, %q, stderr with %q", tt.path, r.code, r.stdout, r.stderr, tt.code, tt.out, tt.stderr)
		}
	}
}

// weatherServer is a loopback TLS server for api.weather.example with its
// own CA, whose PEM file it returns too.
func weatherServer(t *testing.T, token string) (*httptest.Server, string) {
	t.Helper()
	return testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/v1/current" {
			http.NotFound(w, r)
			return
		}
		temps := map[string]float64{"Paris": 21.5, "Oslo": -3}
		city := r.URL.Query().Get("city")
		temp, ok := temps[city]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"location": city, "temp_c": temp, "condition": "partly cloudy", "wind_kph": 12})
	}), "api.weather.example")
}

// TestWeather calls the weather example through maiden.Host against a real
// TLS server on loopback, with the credential from the environment. It sets
// the environment, so it is the package's one test that does not run in
// parallel: the others (each on its own files, sharing only the once-built
// examples and the compiled-code cache, both safe for concurrent use) start
// after it.
func TestWeather(t *testing.T) {
	wasm := built(t, "weather")
	dir := t.TempDir()
	const token = "s3cret-weather-token"
	srv, ca := weatherServer(t, token)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	cfgPath := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, `version = 1

[tools.weather]
path = %q
http_allow = ["api.weather.example"]
secrets = ["WEATHER_TOKEN"]
http_allow_cidrs = ["127.0.0.0/8"]   # the test server is on loopback
http_ca_files = [%q]
http_ports = [%d]
`, wasm, ca, port), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MAIDEN_SECRET_WEATHER_TOKEN", token)
	h, err := maiden.New(cfg, &maiden.Options{
		Isolation: maiden.InProcess,
		// The shared compiled-code cache, where building weather (here or
		// in scripts/demo) left its compilation: not compiled again (4
		// CPU-seconds).
		CacheDir: cacheDir(),
		Resolver: testkit.Loopback("api.weather.example"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	api := "https://api.weather.example:" + strconv.Itoa(port)
	ctx := context.Background()
	weather := func(t *testing.T, input map[string]string) maiden.Result {
		t.Helper()
		input["api"] = api
		b, _ := json.Marshal(input)
		res, err := h.Call(ctx, maiden.Call{Tool: "weather", Input: string(b)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := weather(t, map[string]string{"city": "Paris"})
	if !res.OK {
		t.Fatalf("Paris: %s: %s", res.Error.Kind, res.Error.Message)
	}
	if res.Output != `{"city":"Paris","temperature":21.5,"units":"metric","conditions":"partly cloudy"}` {
		t.Errorf("Paris: output %s", res.Output)
	}
	if len(res.Logs) != 1 || res.Logs[0].Message != "weather for Paris: 21.5°C, partly cloudy" {
		t.Errorf("logs %+v", res.Logs)
	}

	res = weather(t, map[string]string{"city": "Oslo", "units": "imperial"})
	if !res.OK || !strings.Contains(res.Output, `"temperature":26.6`) {
		t.Errorf("Oslo, imperial: %+v", res)
	}
	res = weather(t, map[string]string{"city": "Atlantis"})
	if res.OK || res.Error.Kind != maiden.KindTool || !strings.Contains(res.Error.Message, `does not know the city "Atlantis"`) {
		t.Errorf("unknown city: %+v", res)
	}
	// The credential's value never reaches the tool: nothing it returns or
	// logs can contain it.
	b, _ := json.Marshal(res)
	if strings.Contains(string(b), token) {
		t.Error("the secret value appears in a result")
	}

	// Without the secret's value the host refuses before sending anything,
	// and the call is kind denied, naming the variable to set.
	t.Setenv("MAIDEN_SECRET_WEATHER_TOKEN", "")
	os.Unsetenv("MAIDEN_SECRET_WEATHER_TOKEN")
	res = weather(t, map[string]string{"city": "Paris"})
	if res.OK || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, "set MAIDEN_SECRET_WEATHER_TOKEN") || !strings.Contains(res.Error.Message, "(rule: credential-missing)") {
		t.Errorf("no secret: %+v", res)
	}
}

// benchHost is a Host over the WAT echo fixture and the examples, each
// compiled once (in memory) before timing starts.
func benchHost(b *testing.B, cacheDir string) (*maiden.Host, map[string]string) {
	b.Helper()
	tools := map[string]string{
		"wat": testkit.Component(b, "echo"),
		"go":  built(b, "echo"),
		"js":  built(b, "jq-lite"),
	}
	var cfg strings.Builder
	cfg.WriteString("version = 1\n")
	for name, path := range tools {
		fmt.Fprintf(&cfg, "\n[tools.%s]\npath = %q\nmemory_mb = 128\n", name, path)
	}
	p := filepath.Join(b.TempDir(), "agent.toml")
	if err := os.WriteFile(p, []byte(cfg.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		b.Fatal(err)
	}
	h, err := maiden.New(c, &maiden.Options{Isolation: maiden.InProcess, CacheDir: cacheDir})
	if err != nil {
		b.Fatal(err)
	}
	return h, tools
}

// benchInput is each tool's input: the echoes get the same message; jq-lite
// a small document and path.
var benchInput = map[string]string{
	"wat": `{"message":"hello"}`,
	"go":  `{"message":"hello"}`,
	"js":  `{"data":{"message":"hello"},"path":"message"}`,
}

func callOK(b *testing.B, h *maiden.Host, tool string) {
	res, err := h.Call(context.Background(), maiden.Call{Tool: tool, Input: benchInput[tool]})
	if err != nil || !res.OK {
		b.Fatalf("%s: %v %+v", tool, err, res.Error)
	}
}

// BenchmarkCall is the per-call latency with a warm compile cache: every
// call instantiates the component afresh (Go: the runtime starts; JS: the
// engine's heap is set up) and runs execute once.
func BenchmarkCall(b *testing.B) {
	h, _ := benchHost(b, "off")
	defer h.Close(context.Background())
	for _, tool := range []string{"wat", "go", "js"} {
		callOK(b, h, tool) // compile
		b.Run(tool, func(b *testing.B) {
			for b.Loop() {
				callOK(b, h, tool)
			}
		})
	}
}

// BenchmarkColdStart is a new Host's first call: compiling the component
// (no disk cache) or loading the compiled code from the disk cache.
func BenchmarkColdStart(b *testing.B) {
	cache := b.TempDir()
	os.Chmod(cache, 0o700)
	h, _ := benchHost(b, "off") // builds the examples before any timing
	h.Close(context.Background())
	for _, tool := range []string{"wat", "go", "js"} {
		for _, mode := range []string{"compile", "diskcache"} {
			b.Run(tool+"/"+mode, func(b *testing.B) {
				dir := "off"
				if mode == "diskcache" {
					dir = cache
					h, _ := benchHost(b, dir)
					callOK(b, h, tool) // fills the disk cache
					h.Close(context.Background())
				}
				for b.Loop() {
					h, _ := benchHost(b, dir)
					callOK(b, h, tool)
					h.Close(context.Background())
				}
			})
		}
	}
}

// BenchmarkTemplateBuild is `maiden new` plus `maiden build` of each
// template from scratch; "build-s" is the build alone (as maiden build
// reports it), ns/op includes loading the result (a compile, cache off).
func BenchmarkTemplateBuild(b *testing.B) {
	for _, lang := range []string{"go", "js"} {
		b.Run(lang, func(b *testing.B) {
			var took time.Duration
			var size int64
			i := 0
			for b.Loop() {
				i++
				dir := filepath.Join(b.TempDir(), fmt.Sprintf("t%d", i))
				ctx := context.Background()
				if r := maidenCmd(ctx, "new", lang, dir); r.code != 0 {
					b.Fatalf("new: %+v", r)
				}
				r := maidenCmd(ctx, "build", "-cache", "off", dir)
				if r.code != 0 {
					b.Fatalf("build: %+v", r)
				}
				if m := wroteRE.FindStringSubmatch(r.stderr); m != nil {
					d, _ := time.ParseDuration(m[1])
					took += d
				}
				if fi, err := os.Stat(filepath.Join(dir, filepath.Base(dir)+".wasm")); err == nil {
					size = fi.Size()
				}
			}
			b.ReportMetric(took.Seconds()/float64(i), "build-s")
			b.ReportMetric(float64(size)/1e6, "MB")
		})
	}
}
