package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestServeStopAnswersWaitingCallsPending is issue 22's eighth finding: a
// call waiting for approval when `maiden serve -http` gets SIGTERM (here:
// its context ends, as main's signal.NotifyContext does) is answered with
// its pending result and request ID before the server exits, not dropped
// with the connection ("fetch failed: other side closed"), and the request
// stays pending for an operator.
func TestServeStopAnswersWaitingCallsPending(t *testing.T) {
	t.Parallel()
	src := fmt.Sprintf(`version = 1

[tools.echo]
path = %q

[operators.alice]

[[middleware]]
use  = "approve"
when = 'args.message == "hi"'
`, testkit.Component(t, "echo"))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr testkit.SyncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "-config", cfg, "-http", "127.0.0.1:0", "-watch=false"}, strings.NewReader(""), io.Discard, &stderr)
	}()
	re := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/mcp`)
	var base string
	for deadline := time.Now().Add(60 * time.Second); base == ""; {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1]
			break
		}
		select {
		case code := <-exited:
			t.Fatalf("serve exited %d before listening: %s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen within 60s: %s", stderr.String())
		}
	}
	session := initHTTP(t, base)

	type answer struct {
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{string(b), err}
	}()

	// The event waited for: the request is in the store, so the call waits.
	var id string
	for deadline := time.Now().Add(60 * time.Second); id == ""; {
		var list []map[string]any
		if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "pending", "-json").stdout), &list); err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 {
			id, _ = list[0]["id"].(string)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no approval request appeared in maiden pending")
		}
		time.Sleep(50 * time.Millisecond)
	}

	cancel() // SIGTERM
	var a answer
	select {
	case a = <-answered:
	case <-time.After(60 * time.Second):
		t.Fatal("the waiting call got no answer within 60s of the stop")
	}
	if a.err != nil {
		t.Fatalf("the waiting call's connection failed instead of answering pending: %v", a.err)
	}
	for _, want := range []string{`"isError":true`, `pending`, id, `"id":7`} {
		if !strings.Contains(a.body, want) {
			t.Errorf("the waiting call's answer lacks %q: %.600s", want, a.body)
		}
	}
	select {
	case code := <-exited:
		if code != exitOK {
			t.Errorf("serve exited %d after SIGTERM: %s", code, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not exit within 60s of the stop")
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "pending", "-json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0]["id"] != id {
		t.Errorf("after the stop, pending lists %v; want request %s still waiting for an operator", list, id)
	}
}
