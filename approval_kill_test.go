package maiden_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestApprovalChildHelper is not a test: run by TestApprovalSurvivesKill as
// a separate process, it makes one call as agent "a" under the
// configuration in MAIDEN_TEST_APPROVAL_CHILD, printing "asked ID" when the
// call waits for a human and "result JSON" when it ends. It polls the store
// for a decision every MAIDEN_TEST_APPROVAL_POLL and waits up to
// MAIDEN_TEST_APPROVAL_WAIT.
func TestApprovalChildHelper(t *testing.T) {
	cfgPath := os.Getenv("MAIDEN_TEST_APPROVAL_CHILD")
	if cfgPath == "" {
		return // the ordinary test run: nothing to do
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	poll, _ := time.ParseDuration(os.Getenv("MAIDEN_TEST_APPROVAL_POLL"))
	wait, _ := time.ParseDuration(os.Getenv("MAIDEN_TEST_APPROVAL_WAIT"))
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: os.Getenv("MAIDEN_TEST_CACHE"), Resolver: testkit.Loopback("api.example.com"), ApprovalPoll: poll})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	tool := os.Getenv("MAIDEN_TEST_APPROVAL_TOOL")
	if tool == "" {
		tool = "fetcher"
	}
	res, err := h.Call(context.Background(), maiden.Call{Agent: "a", Tool: tool, Input: os.Getenv("MAIDEN_TEST_APPROVAL_INPUT"), ApprovalWait: wait,
		Session:    os.Getenv("MAIDEN_TEST_APPROVAL_SESSION"),
		OnApproval: func(r maiden.ApprovalRequest) { fmt.Println("asked", r.ID) }})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(res)
	fmt.Println("result", string(b))
	h.Close(context.Background())
	os.Exit(0)
}

// child is a running TestApprovalChildHelper.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, cfgPath, input string, poll, wait time.Duration, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestApprovalChildHelper$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), env...), "MAIDEN_TEST_APPROVAL_CHILD="+cfgPath, "MAIDEN_TEST_APPROVAL_INPUT="+input,
		"MAIDEN_TEST_APPROVAL_POLL="+poll.String(), "MAIDEN_TEST_APPROVAL_WAIT="+wait.String(), "MAIDEN_TEST_CACHE="+testkit.CompileCache(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "asked ") || strings.HasPrefix(line, "result ") || strings.HasPrefix(line, "error ") {
				c.lines <- line
			}
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() // only the process this test started, by its PID
			cmd.Wait()
		}
	})
	return c
}

// next returns the child's next line with the given prefix.
func (c *child) next(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok || !strings.HasPrefix(line, prefix+" ") {
			t.Fatalf("child said %q (open %v), want %q ...", line, ok, prefix)
		}
		return strings.TrimPrefix(line, prefix+" ")
	case <-time.After(60 * time.Second):
		t.Fatalf("child said nothing for 60 s, want %q", prefix)
	}
	return ""
}

func (c *child) result(t *testing.T) maiden.Result {
	t.Helper()
	var res maiden.Result
	line := ""
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatal("child ended without a result")
			}
			line = l
		case <-time.After(60 * time.Second):
			t.Fatal("child said nothing for 60 s, want a result")
		}
		if !strings.HasPrefix(line, "asked ") {
			break
		}
	}
	if !strings.HasPrefix(line, "result ") {
		t.Fatalf("child said %q, want a result", line)
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "result ")), &res); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
	return res
}

func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
}

// TestApprovalSurvivesKill: CARDS.md A16 and the kill -9 cases,
// with real processes and a tool that counts its executions through a
// loopback HTTPS server it fetches from: exactly one execution per
// approved call.
//
//  1. A process waits for approval; the human approves; the process is
//     killed (-9) before it consumed the approval (it polls rarely). The
//     call repeated by a new process runs once; repeated again, it asks
//     again (an approval is consumed once).
//  2. A process runs an approved call; it is killed while the tool runs
//     (the server holds the request). A new process repeating the call is
//     told it was interrupted and is not re-run by itself; approved again,
//     it runs once more.
func TestApprovalSurvivesKill(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		hits = map[string]int{}
		hold = make(chan struct{})
	)
	var held atomic.Bool
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		if r.URL.Path == "/slow" && n == 1 {
			held.Store(true)
			select { // the first execution hangs until its process is killed
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprintf(w, "hit %d", n)
	}), "api.example.com")
	defer close(hold)
	count := func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return hits[path]
	}
	u, _ := url.Parse(srv.URL)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "agent.toml")
	body := fmt.Sprintf(`version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%q]
timeout_ms = 30000
[[middleware]]
use = "approve"
reason = "every fetch needs a human"
[agents.a]
tools = ["fetcher"]
grants = ["tool:invoke fetcher --...", "network:connect *"]
`, testkit.Component(t, "js/fetcher"), u.Port(), ca)
	if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	op, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)}) // the operator's side
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close(context.Background())
	ctx := context.Background()
	input := func(path string) string { return `{"url":"https://api.example.com:` + u.Port() + path + `"}` }

	// 1. Killed between the approval and the start.
	a := startChild(t, cfgPath, input("/fast"), time.Hour, time.Minute)
	id := a.next(t, "asked")
	if _, err := op.Decide(ctx, id, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	a.kill(t)
	if n := count("/fast"); n != 0 {
		t.Fatalf("the tool ran %d times before anyone repeated the call", n)
	}
	res := startChild(t, cfgPath, input("/fast"), 20*time.Millisecond, -1).result(t)
	if !res.OK || res.Output != "200 hit 1" {
		t.Fatalf("repeated after approval: %+v %+v", res, res.Error)
	}
	res = startChild(t, cfgPath, input("/fast"), 20*time.Millisecond, -1).result(t)
	if res.Error == nil || res.Error.Kind != maiden.KindPending {
		t.Fatalf("repeated again: %+v %+v, want pending (the approval was used)", res, res.Error)
	}
	if n := count("/fast"); n != 1 {
		t.Fatalf("the approved call ran %d times, want 1", n)
	}

	// 2. Killed while the tool runs.
	d := startChild(t, cfgPath, input("/slow"), 20*time.Millisecond, time.Minute)
	id = d.next(t, "asked")
	if _, err := op.Decide(ctx, id, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !held.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the approved call never reached the server")
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.kill(t)
	e := startChild(t, cfgPath, input("/slow"), 20*time.Millisecond, -1)
	e.next(t, "asked")
	res = e.result(t)
	if res.Error == nil || res.Error.Kind != maiden.KindPending || !strings.Contains(res.Error.Message, "interrupted") || !strings.Contains(res.Error.Message, "never re-run by itself") {
		t.Fatalf("repeated after a kill while running: %+v %+v", res, res.Error)
	}
	if r, err := op.Approval(ctx, id); err != nil || r.State != "interrupted" {
		t.Fatalf("the killed call's approval: %+v %v", r, err)
	}
	if n := count("/slow"); n != 1 {
		t.Fatalf("after the kill the tool ran %d times, want 1 (not re-run by itself)", n)
	}
	if _, err := op.Decide(ctx, res.Error.Approval, maiden.Answer{Approve: true}); err != nil {
		t.Fatal(err)
	}
	res = startChild(t, cfgPath, input("/slow"), 20*time.Millisecond, -1).result(t)
	if !res.OK || res.Output != "200 hit 2" {
		t.Fatalf("approved again: %+v %+v", res, res.Error)
	}
	if n, _, err := op.VerifyAudit(ctx); err != nil {
		t.Errorf("VerifyAudit after the kills = %d, %v", n, err)
	}
}
