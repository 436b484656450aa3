package mcpserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestNodeClientApprovals: the approval flow end to end with the official
// TypeScript SDK against `maiden serve`: a call of a tool a rule sends to
// a human waits (progress says so; a client that declared URL elicitation
// is asked to open the inbox page, and told when a human decided), the
// test decides with `maiden approve` / `maiden deny -reason` from another
// process, and the call completes or is denied with the reason. The tool
// fetches a loopback HTTPS server that counts its executions: exactly one
// per approved call. Over HTTP with and without elicitation support, and
// over stdio (no inbox URL there: progress only).
func TestNodeClientApprovals(t *testing.T) {
	t.Parallel()
	bin := buildMaiden(t)
	dir := npmDir(t, "node-client", "client.mjs", "approvals.mjs")
	var hits atomic.Int64
	counterSrv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hit %d", hits.Add(1))
	}), "localhost")
	u, _ := url.Parse(counterSrv.URL)
	counter := "https://localhost:" + u.Port() + "/"
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	toml := fmt.Sprintf(`version = 1

[tools.fetcher]
path = %q
http_allow = ["localhost"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8", "::1/128"]
http_ca_files = [%q]

[tools.echo]
path = %q

[[middleware]]
use = "approve"
when = 'tool == "fetcher"'
reason = "fetches from the network"

[agents.alice]
tools = ["fetcher", "echo"]
grants = ["tool:invoke fetcher --...", "tool:invoke echo --...", "network:connect *"]
`, testkit.Component(t, "js/fetcher"), u.Port(), ca, testkit.Component(t, "echo"))
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := testkit.CompileCache(t) // shared: each component compiles once per run
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("maiden %s: %v\n%s%s", strings.Join(args, " "), err, o.String(), e.String())
		}
		return o.String()
	}
	token := strings.TrimSpace(run(t, "agents", "token", "-config", cfg, "alice"))
	run(t, "check", "-config", cfg, "-cache", cache) // warm the compile cache

	// drive runs approvals.mjs, deciding what it asks with the maiden CLI.
	decision := regexp.MustCompile(`^(APPROVE|DENY) (\S+)$`)
	drive := func(t *testing.T, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", append([]string{"approvals.mjs"}, args...)...)
		cmd.Dir = dir
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			log.WriteString(line + "\n")
			if m := decision.FindStringSubmatch(line); m != nil {
				if m[1] == "APPROVE" {
					run(t, "approve", "-config", cfg, m[2])
				} else {
					run(t, "deny", "-config", cfg, "-reason", "not today", m[2])
				}
				io.WriteString(stdin, "go\n")
			}
		}
		err = cmd.Wait()
		t.Logf("node approvals.mjs %s:\n%s", args[0], log.String())
		if err != nil || !regexp.MustCompile(`[1-9]\d* passed, 0 failed`).MatchString(log.String()) {
			t.Fatalf("node approvals.mjs %s: %v", args[0], err)
		}
	}

	for _, tc := range []struct {
		mode string
		runs int64 // approved calls
	}{{"elicit", 2}, {"plain", 1}} {
		t.Run(tc.mode, func(t *testing.T) {
			hits.Store(0)
			srv := startInspected(t, bin, os.Environ(), "-config", cfg, "-cache", cache)
			drive(t, tc.mode, srv.url, token, counter)
			srv.stop(t)
			if n := hits.Load(); n != tc.runs {
				t.Errorf("the tool ran %d times, want %d (once per approved call)", n, tc.runs)
			}
		})
	}
	t.Run("stdio", func(t *testing.T) {
		hits.Store(0)
		drive(t, "stdio", bin, cfg, "alice", counter, cache)
		if n := hits.Load(); n != 1 {
			t.Errorf("the tool ran %d times, want 1", n)
		}
	})
}
