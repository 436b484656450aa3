package maiden_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestImportStartErrorRedacted: an MCP server over HTTP that refuses
// maiden's initialize with a JSON-RPC error quoting the Authorization
// header it was sent (a server telling why it refuses an expired token)
// has its words kept as why the import is down. They went, the
// credential in them, to the operator's log ("MCP upstream failed to
// start", "MCP upstream not up yet"), to the agent calling one of its
// tools (kind unavailable, and the call's record) and to maiden check.
// Each is redacted as the upstream's answers to a call are.
func TestImportStartErrorRedacted(t *testing.T) {
	t.Parallel()
	const secret = "up-Tok3n-1f9c2e77-echoed"
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		_ = json.Unmarshal(body, &req)
		if len(req.ID) == 0 {
			req.ID = json.RawMessage("1")
		}
		msg, _ := json.Marshal("token refused (expired?): " + r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32001,"message":` + string(msg) + `}}`))
	}))
	t.Cleanup(hs.Close)
	var oplog testkit.SyncBuffer
	h := newHostWith(t, `version = 1
[mcp.up]
accept_new_tools = true
url = "`+hs.URL+`"
credential = "UP_TOKEN"
[agents.a]
tools = ["up"]
grants = ["tool:invoke up.* --...", "secret:use UP_TOKEN"]
`, maiden.Options{Isolation: maiden.InProcess, Logger: slog.New(slog.NewTextHandler(&oplog, nil)),
		LookupSecret: func(name string) (string, bool) { return secret, name == "UP_TOKEN" }})

	res, err := h.Call(context.Background(), maiden.Call{Agent: "a", Tool: "up.anything", Input: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil {
		t.Fatalf("the call of a tool of an import that never started: %+v, want kind unavailable", res)
	}
	if strings.Contains(res.Error.Message, secret) {
		t.Errorf("the agent was given the credential the upstream echoed: %s", res.Error.Message)
	} else if !strings.Contains(res.Error.Message, "[REDACTED:UP_TOKEN]") {
		t.Errorf("the agent's error %q, want the upstream's words with the credential [REDACTED:UP_TOKEN]", res.Error.Message)
	}

	reports, err := h.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checked := false
	for _, r := range reports {
		if r.Err != nil {
			checked = true
			if strings.Contains(r.Err.Error(), secret) {
				t.Errorf("maiden check shows the credential the upstream echoed: %s: %v", r.Tool, r.Err)
			}
		}
	}
	if !checked {
		t.Errorf("check reported no error for the import that does not start: %+v", reports)
	}

	logged := oplog.String()
	if strings.Contains(logged, secret) {
		t.Errorf("the operator's log holds the credential the upstream echoed:\n%.2000s", logged)
	} else if !strings.Contains(logged, "[REDACTED:UP_TOKEN]") {
		t.Errorf("the operator's log has no redacted start failure:\n%.2000s", logged)
	}
}

// TestWrappedCLIOutputRedactedBeforeItIsCut: a wrapped CLI holds its
// secrets' values, and what it prints is redacted before the agent reads
// it. Its output was cut at max_output_bytes first: an echo of the value
// that straddles the cap (after padding the agent's arguments chose, as an
// API echoes a header after a body of the query's length) left its
// beginning, which the redactor no longer knows, on stdout and stderr.
// Cut after redaction, a capture that ended inside an echo must not keep
// its beginning either, however much redaction shortened what came before
// it (a 2,000-byte key echoed 34 times: 68,000 bytes, 646 redacted).
func TestWrappedCLIOutputRedactedBeforeItIsCut(t *testing.T) {
	t.Parallel()
	exe := testkit.Binary(t, "./testdata/hostilecli")
	short := "gh-v4lue-0a1b2c3d4e5f60718293a4b5c6d7e8f9" // 40 bytes
	var long strings.Builder
	long.WriteString("K3y-")
	for i := 0; long.Len() < 2000; i++ {
		sum := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		long.WriteString(hex.EncodeToString(sum[:]))
	}
	for _, tc := range []struct {
		name, secret string
		n, repeat    int
	}{
		{"an echo across the cap", short, 1000 - (len(short) - 1), 1},
		{"an echo across the capture's end", long.String()[:2000], 0, 34},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			secret := tc.secret
			h := newHostWith(t, `version = 1
[clis.hostile]
path = "`+exe+`"
command = '{"maiden_command": 1, "name": "hostile", "positionals": [{"name": "args", "variadic": true, "accept": ["first-word"]}]}'
secrets = ["GH_TOKEN"]
max_output_bytes = 1000
timeout_ms = 20000
[agents.dev]
tools = ["hostile"]
grants = ["tool:invoke hostile -- ...", "secret:use GH_TOKEN"]
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) { return secret, name == "GH_TOKEN" }})
			in := fmt.Sprintf(`{"args":["echo-env-at","%d","%d","GH_TOKEN"]}`, tc.n, tc.repeat)
			res, err := h.Call(context.Background(), maiden.Call{Agent: "dev", Tool: "hostile", Input: in})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK {
				t.Fatalf("%+v %+v", res, res.Error)
			}
			begin := secret[:12]
			if strings.Contains(res.Output, begin) {
				t.Errorf("stdout, cut at max_output_bytes, keeps the beginning of the secret: ...%s", res.Output[max(0, len(res.Output)-80):])
			}
			for _, l := range res.Logs {
				if strings.Contains(l.Message, begin) {
					t.Errorf("a stderr line, cut at max_output_bytes, keeps the beginning of the secret: ...%s", l.Message[max(0, len(l.Message)-80):])
				}
			}
			if len(res.Output) > 1000 {
				t.Errorf("stdout is %d bytes, over max_output_bytes (1000)", len(res.Output))
			}
		})
	}
}
