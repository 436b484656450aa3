package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// gitRepo makes a scratch repository with two commits.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main")
	for i, msg := range []string{"first commit", "second commit"} {
		if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(strings.Repeat("x", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		run("add", "f.txt")
		run("commit", "-q", "-m", msg)
	}
	return dir
}

// TestWrappedGit is the worked example (examples/git) through the Host:
// a card allowing `git log --max-count=*` only; git run confined with argv
// built from the validated call. Allowed, denied by the card (status, log
// without a count), not expressible (push: not described), and injection
// attempts through arguments refused before anything runs.
func TestWrappedGit(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	root := testkit.RepoRoot(t)
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.git]
path = "/usr/bin/git"
command_file = "`+filepath.Join(root, "examples/git/git.command.json")+`"
dir = "`+repo+`"
read_paths = ["`+repo+`"]
env = ["GIT_PAGER=cat", "HOME=`+repo+`", "GIT_CONFIG_NOSYSTEM=1"]
timeout_ms = 10000
[agents.dev]
tools = ["git"]
grants = ["tool:invoke git log --max-count=*"]
[agents.wide]
tools = ["git"]
grants = ["tool:invoke git log --max-count=* -- ..."]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	call := func(in string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: "dev", Tool: "git", Input: in})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		return res
	}
	res := call(`{"command":"log","max-count":1}`)
	if !res.OK || !strings.Contains(res.Output, "second commit") || strings.Contains(res.Output, "first commit") {
		t.Fatalf("git log -n1: %+v %+v", res, res.Error)
	}
	wantKind(t, call(`{"command":"log","max-count":1,"oneline":true}`), maiden.KindDenied, "")
	wantKind(t, call(`{"command":"status"}`), maiden.KindDenied, "tool:invoke git status")
	wantKind(t, call(`{"command":"log"}`), maiden.KindDenied, "")
	wantKind(t, call(`{"command":"push"}`), maiden.KindInput, "push")
	wantKind(t, call(`{"command":"log","max-count":1,"upload-pack":"touch /tmp/owned"}`), maiden.KindInput, "upload-pack")
	wantKind(t, call(`{"command":"log","max-count":1,"c":"core.sshCommand=touch /tmp/owned"}`), maiden.KindInput, "")
	// Paths are positionals: this card allows none.
	owned := filepath.Join(t.TempDir(), "owned")
	wantKind(t, call(`{"command":"log","max-count":1,"paths":["f.txt"]}`), maiden.KindDenied, "")
	// A wider card allows paths; one that looks like an option reaches git
	// after "--", as a path, and writes nothing.
	res, err := h.Call(ctx, maiden.Call{Agent: "wide", Tool: "git", Input: `{"command":"log","max-count":1,"paths":["--output=` + owned + `"]}`})
	if err != nil || !res.OK {
		t.Fatalf("dash positional: %+v %v", res.Error, err)
	}
	if _, err := os.Stat(owned); err == nil {
		t.Fatal("a positional reached git as an option (--output wrote a file)")
	}
	infos, err := h.ToolsFor(ctx, "dev")
	if err != nil || len(infos) != 1 || !strings.Contains(infos[0].InputSchema, `"command"`) {
		t.Fatalf("tools/list: %+v %v", infos, err)
	}
}

// TestWrappedCLIConfined: a wrapped cat reads a file under its read_paths
// and is refused one outside them by Landlock, through the Host (the
// probe passed, so the run was confined).
func TestWrappedCLIConfined(t *testing.T) {
	t.Parallel()
	inside, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{inside, outside} {
		if err := os.WriteFile(filepath.Join(d, "secret.txt"), []byte("contents of "+filepath.Base(d)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.cat]
path = "/bin/cat"
command = '{"maiden_command": 1, "name": "cat", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
read_paths = ["`+inside+`"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	res, err := h.Call(ctx, maiden.Call{Tool: "cat", Input: `{"files":["` + filepath.Join(inside, "secret.txt") + `"]}`})
	if err != nil || !res.OK || !strings.Contains(res.Output, "contents of") {
		t.Fatalf("inside: %+v %+v %v", res, res.Error, err)
	}
	res, err = h.Call(ctx, maiden.Call{Tool: "cat", Input: `{"files":["` + filepath.Join(outside, "secret.txt") + `"]}`})
	if err != nil || res.OK || strings.Contains(res.Output, "contents of") {
		t.Fatalf("outside read_paths: %+v %+v %v", res, res.Error, err)
	}
	if res.Error.Kind != maiden.KindTool || !strings.Contains(res.Error.Message, "Permission denied") {
		t.Errorf("outside: %+v", res.Error)
	}
}

// curlCLI is agent.toml's [clis.curl]: the system's curl wrapped with the
// options the tests pass (cacert, silent, show-error, noproxy) and the URL
// as its one positional, reading the test CA's directory, its network the
// listed hosts on port (loopback addresses allowed, as the test servers
// are).
func curlCLI(ca, port string, hosts ...string) string {
	return `[clis.curl]
path = "/usr/bin/curl"
option_style = "separate"
command = '{"maiden_command": 1, "name": "curl", "options": [{"name": "cacert"}, {"name": "silent", "kind": "bool"}, {"name": "show-error", "kind": "bool"}, {"name": "noproxy"}], "positionals": [{"name": "url"}]}'
read_paths = ["` + filepath.Dir(ca) + `"]
http_allow = ["` + strings.Join(hosts, `", "`) + `"]
http_ports = [` + port + `]
http_allow_cidrs = ["127.0.0.0/8"]
timeout_ms = 10000
`
}

// TestWrappedCLIThroughTheProxy: a wrapped curl whose [clis] table allows
// one host reaches it only through maiden's CONNECT proxy (Landlock lets it
// connect to the proxy's port only): the allowed host answers, a host off
// the list is refused by the proxy, and going around the proxy is refused
// by Landlock.
func TestWrappedCLIThroughTheProxy(t *testing.T) {
	t.Parallel()
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello through the tunnel")
	}), "api.example.com", "evil.example.com")
	u, _ := url.Parse(srv.URL)
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
`+curlCLI(ca, u.Port(), "api.example.com"), maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("api.example.com", "evil.example.com")}, "echo")
	ctx := context.Background()
	get := func(extra, target string) maiden.Result {
		t.Helper()
		in := `{"cacert":"` + ca + `","silent":true,"show-error":true` + extra + `,"url":"` + target + `"}`
		res, err := h.Call(ctx, maiden.Call{Tool: "curl", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := get("", "https://api.example.com:"+u.Port()+"/")
	if !res.OK || res.Output != "hello through the tunnel" {
		t.Fatalf("allowed host: %+v %+v %+v", res, res.Error, res.Logs)
	}
	// Refused by the proxy: the call is denied with the gate's rule, as a
	// refused http-fetch is (issue 27, rough edge 10), not the CLI's
	// "CONNECT tunnel failed, response 403".
	if res := get("", "https://evil.example.com:"+u.Port()+"/"); res.OK || res.Error.Kind != maiden.KindDenied ||
		!strings.HasPrefix(res.Error.Message, "its CONNECT was refused: ") || !strings.Contains(res.Error.Message, "(rule: allowlist)") {
		t.Fatalf("a host off the list: %+v %+v", res, res.Error)
	}
	// Going around the proxy: refused by Landlock, no CONNECT refusal,
	// the CLI's own failure.
	if res := get(`,"noproxy":"*"`, "https://127.0.0.1:"+u.Port()+"/"); res.OK || res.Error.Kind != maiden.KindTool {
		t.Fatalf("going around the proxy worked: %+v %+v", res, res.Error)
	}
}

// TestWrappedCLIAlwaysApproval: an approve rule on a wrapped CLI; the
// always-card minted for `git log --max-count=1` lets that call run again
// without asking, and not `git log --max-count=2`.
func TestWrappedCLIAlwaysApproval(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	root := testkit.RepoRoot(t)
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.git]
path = "/usr/bin/git"
command_file = "`+filepath.Join(root, "examples/git/git.command.json")+`"
dir = "`+repo+`"
read_paths = ["`+repo+`"]
env = ["GIT_PAGER=cat", "HOME=`+repo+`", "GIT_CONFIG_NOSYSTEM=1"]
[[middleware]]
use = "approve"
[agents.dev]
tools = ["git"]
grants = ["tool:invoke git log --max-count=*"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	call := func(in string) maiden.Result {
		return mustCall(t, h, maiden.Call{Agent: "dev", Tool: "git", Input: in, ApprovalWait: -1})
	}
	res := call(`{"command":"log","max-count":1}`)
	wantKind(t, res, maiden.KindPending, "")
	r, err := h.Decide(ctx, res.Error.Approval, maiden.Answer{Approve: true, Always: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Rendered != "log --max-count=1" || r.AlwaysGrant != "approve:always git log --max-count=1" {
		t.Errorf("request shows %q, always grant %q", r.Rendered, r.AlwaysGrant)
	}
	for range 2 {
		if res := call(`{"command":"log","max-count":1}`); !res.OK {
			t.Fatalf("under the always-card: %+v", res.Error)
		}
	}
	wantKind(t, call(`{"command":"log","max-count":2}`), maiden.KindPending, "")

	// Each approve verdict carries the cards' answer to approve:always as
	// Decide gave it: the always-card for the two runs it let through, a
	// denial for the two calls that asked a human (the "approved" after
	// the first pass is the human's one-time approval, used up with it).
	var got []string
	for _, rec := range trail(t, h, "") {
		var body struct {
			Middleware []struct {
				Verdict, Detail string
				Decision        *api.Decision
			}
		}
		if json.Unmarshal(rec.Body, &body) != nil {
			continue
		}
		for _, v := range body.Middleware {
			d := v.Decision
			if v.Verdict == "approved" && d == nil {
				// The one-time approval the always-card was minted
				// from, used up by the card's first run (after its pass).
				got = append(got, "approved")
				continue
			}
			if d == nil {
				t.Fatalf("%s record: the approve verdict %+v carries no decision", rec.Kind, v)
			}
			switch {
			case v.Verdict == "pass" && d.Allow && d.Card != "" && v.Detail == "approved always by card "+d.Card && d.Grant == r.AlwaysGrant:
				got = append(got, "pass by "+d.Grant)
			case v.Verdict == "pending" && !d.Allow && d.Card == "" && d.Rule != "":
				got = append(got, "pending: "+d.Target)
			default:
				t.Fatalf("%s record: approve verdict %+v with decision %+v", rec.Kind, v, d)
			}
		}
	}
	want := []string{"pending: approve:always git log --max-count=1", "pass by " + r.AlwaysGrant, "approved", "pass by " + r.AlwaysGrant,
		"pending: approve:always git log --max-count=2"}
	if !slices.Equal(got, want) {
		t.Errorf("approve verdicts:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
