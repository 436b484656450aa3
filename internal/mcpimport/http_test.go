//lint:file-ignore SA1019 the tests exercise MCP logging, deprecated upstream (SEP-2577) but still served

package mcpimport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/mcpimport"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const testToken = "mt_s3cret-value-never-logged"

type echoIn struct {
	Message string `json:"message"`
}

type echoOut struct {
	Echo string `json:"echo"`
}

// httpUpstream is an in-process Go SDK MCP server behind a bearer-token
// check, on a loopback httptest server.
type httpUpstream struct {
	srv       *mcp.Server
	ts        *httptest.Server
	mu        sync.Mutex
	seenAuth  []string // every Authorization header received
	refused   atomic.Int64
	cancelled atomic.Int64
	// release ends the "wait" tool's calls.
	release chan struct{}
	// together, when set before the calls, holds each "wait" call's log
	// until that many calls have arrived (a sync.WaitGroup of that count).
	together *sync.WaitGroup
}

func newHTTPUpstream(t testing.TB) *httpUpstream { return newHTTPUpstreamAt(t, "") }

// newHTTPUpstreamAt listens at addr ("" = any loopback port).
func newHTTPUpstreamAt(t testing.TB, addr string) *httpUpstream {
	t.Helper()
	h := &httpUpstream{release: make(chan struct{})}
	h.srv = mcp.NewServer(&mcp.Implementation{Name: "go-sdk-upstream", Version: "1"}, nil)
	mcp.AddTool(h.srv, &mcp.Tool{Name: "echo", Description: "echoes its message"},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Echo: in.Message}, nil
		})
	mcp.AddTool(h.srv, &mcp.Tool{Name: "chatty", Description: "logs, reports progress, then answers"},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "chatty", Data: "about " + in.Message})
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 3; i++ {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)}); err != nil {
						return nil, echoOut{}, err
					}
				}
			}
			return nil, echoOut{Echo: in.Message}, nil
		})
	mcp.AddTool(h.srv, &mcp.Tool{Name: "wait", Description: "logs, then waits for the test or its cancellation"},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			if h.together != nil {
				h.together.Done()
				h.together.Wait()
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "secret of " + in.Message})
			select {
			case <-h.release:
				return nil, echoOut{Echo: in.Message}, nil
			case <-ctx.Done():
				h.cancelled.Add(1)
				return nil, echoOut{}, ctx.Err()
			}
		})
	mcp.AddTool(h.srv, &mcp.Tool{Name: "fails", Description: "a tool error"},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{}, errors.New("the tool says no")
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.srv }, nil)
	h.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		h.mu.Lock()
		h.seenAuth = append(h.seenAuth, auth)
		h.mu.Unlock()
		if auth != "Bearer "+testToken {
			h.refused.Add(1)
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		h.ts.Listener.Close()
		h.ts.Listener = l
	}
	h.ts.Start()
	t.Cleanup(func() {
		h.ts.CloseClientConnections()
		h.ts.Close()
	})
	return h
}

func (h *httpUpstream) url() string { return h.ts.URL + "/mcp" }

func tokenCredential(tok string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return "Bearer " + tok, nil }
}

// capturingLogger records the operator's log to check what it never says.
func capturingLogger(t testing.TB) (*slog.Logger, func() string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf, t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return l, func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
	t   testing.TB
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return w.buf.Write(p)
}

func TestHTTPCredentialListCallChange(t *testing.T) {
	h := newHTTPUpstream(t)
	logger, logged := capturingLogger(t)
	u, err := mcpimport.New(mcpimport.Options{Name: "remote", URL: h.url(), Credential: tokenCredential(testToken), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	changed := make(chan struct{}, 16)
	u.OnChange(func() { changed <- struct{}{} })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-changed // the first list
	if got := toolNames(u.Tools()); len(got) != 4 {
		t.Fatalf("tools %v", got)
	}
	echo, _ := findTool(u.Tools(), "echo")
	if echo.OutputSchema == nil {
		t.Error("echo: the Go SDK declares an output schema; got none")
	}
	res, err := u.Call(ctx, "echo", json.RawMessage(`{"message":"over http"}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || string(res.Structured) != `{"echo":"over http"}` {
		t.Errorf("echo: %+v (structured %s)", res, res.Structured)
	}

	// Logs and progress of the call reach its callbacks.
	var logs []api.LogEntry
	var progress []mcpimport.Progress
	res, err = u.Call(ctx, "chatty", json.RawMessage(`{"message":"x"}`),
		func(e api.LogEntry) { logs = append(logs, e) },
		func(p mcpimport.Progress) { progress = append(progress, p) })
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 || logs[0].Level != api.LevelWarn || logs[0].Message != "chatty: about x" {
		t.Errorf("logs %+v: want one warning 'chatty: about x'", logs)
	}
	if len(progress) != 3 || progress[2].Progress != 3 || progress[2].Total != 3 || progress[2].Message != "step 3" {
		t.Errorf("progress %+v", progress)
	}

	// A tool that fails is a result with IsError, not an error.
	res, err = u.Call(ctx, "fails", json.RawMessage(`{"message":"x"}`), nil, nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text, "the tool says no") {
		t.Errorf("failing tool: %+v, %v", res, err)
	}

	// list_changed: a tool added upstream is listed and announced.
	mcp.AddTool(h.srv, &mcp.Tool{Name: "Added Later", Description: "new"},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Echo: "later " + in.Message}, nil
		})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no OnChange after the upstream added a tool")
	}
	waitFor(t, 5*time.Second, "the added tool never listed", func() bool {
		_, ok := findTool(u.Tools(), "Added Later")
		return ok
	})
	res, err = u.Call(ctx, "Added Later", json.RawMessage(`{"message":"y"}`), nil, nil)
	if err != nil || string(res.Structured) != `{"echo":"later y"}` {
		t.Errorf("added tool: %+v, %v", res, err)
	}

	h.mu.Lock()
	for _, a := range h.seenAuth {
		if a != "Bearer "+testToken {
			t.Errorf("a request reached the upstream with Authorization %q", a)
		}
	}
	n := len(h.seenAuth)
	h.mu.Unlock()
	if n < 3 || h.refused.Load() != 0 {
		t.Errorf("%d requests, %d refused", n, h.refused.Load())
	}
	if strings.Contains(logged(), testToken) {
		t.Error("the credential's value is in the operator's log")
	}
}

func TestHTTPWrongCredential(t *testing.T) {
	h := newHTTPUpstream(t)
	logger, logged := capturingLogger(t)
	const wrong = "mt_wrong-token-value"
	u, err := mcpimport.New(mcpimport.Options{Name: "remote", URL: h.url(), Credential: tokenCredential(wrong), Logger: logger,
		BackoffInitial: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	startErr := u.Start(ctx)
	if startErr == nil {
		t.Fatal("Start with a wrong token succeeded")
	}
	if h.refused.Load() == 0 {
		t.Error("the upstream refused nothing: the wrong token never reached it")
	}
	if strings.Contains(startErr.Error(), wrong) || strings.Contains(logged(), wrong) {
		t.Errorf("the credential's value leaked: %v", startErr)
	}
	_, err = u.Call(ctx, "echo", json.RawMessage(`{"message":"x"}`), nil, nil)
	if !errors.Is(err, mcpimport.ErrUnavailable) {
		t.Errorf("call after a failed start: %v, want unavailable", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("the credential's value leaked: %v", err)
	}
	t.Logf("start: %v; call: %v", startErr, err)

	// A credential callback that fails: nothing is sent, the error says so.
	u2, err := mcpimport.New(mcpimport.Options{Name: "remote2", URL: h.url(), Logger: logger, BackoffInitial: time.Hour,
		Credential: func(context.Context) (string, error) { return "", errors.New("secret \"upstream_token\" is not set") }})
	if err != nil {
		t.Fatal(err)
	}
	defer u2.Close()
	before := len(h.seenAuthCopy())
	err = u2.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), `secret "upstream_token" is not set`) {
		t.Errorf("start with a failing credential: %v", err)
	}
	if after := len(h.seenAuthCopy()); after != before {
		t.Errorf("%d requests reached the upstream without a credential", after-before)
	}
}

func (h *httpUpstream) seenAuthCopy() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string{}, h.seenAuth...)
}

// TestHTTPRedirectKeepsCredential: an upstream that redirects does not get
// its redirect followed, and the other server never sees the credential.
func TestHTTPRedirectKeepsCredential(t *testing.T) {
	var got atomic.Int64
	var leaked atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		if a := r.Header.Get("Authorization"); a != "" {
			leaked.Store(a)
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	u, err := mcpimport.New(mcpimport.Options{Name: "redirecting", URL: redirector.URL + "/mcp", Credential: tokenCredential(testToken),
		Logger: testLogger(t), BackoffInitial: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err == nil {
		t.Fatal("Start through a redirect succeeded")
	} else if strings.Contains(err.Error(), testToken) {
		t.Errorf("error has the credential: %v", err)
	}
	if got.Load() != 0 || leaked.Load() != nil {
		t.Errorf("the redirect was followed (%d requests, credential %v)", got.Load(), leaked.Load())
	}
}

func TestHTTPURLRules(t *testing.T) {
	cred := tokenCredential(testToken)
	for _, tc := range []struct{ url, want string }{
		{"http://example.com/mcp", "not loopback"},
		{"http://10.0.0.1/mcp", "not loopback"},
		{"ftp://127.0.0.1/mcp", "scheme"},
		{"https://user:pass@127.0.0.1/mcp", "user information"},
		{"https:///mcp", "no host"},
	} {
		_, err := mcpimport.New(mcpimport.Options{Name: "x", URL: tc.url, Credential: cred})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pass") {
			t.Errorf("%s: the error repeats the password: %v", tc.url, err)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:1/mcp", "http://[::1]:1/mcp", "http://localhost:1/mcp", "https://mcp.example.com/"} {
		if _, err := mcpimport.New(mcpimport.Options{Name: "x", URL: ok, Credential: cred}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if _, err := mcpimport.New(mcpimport.Options{Name: "x", URL: "http://127.0.0.1:1/", Command: []string{"/bin/true"}}); err == nil {
		t.Error("a command and a URL together accepted")
	}
	if _, err := mcpimport.New(mcpimport.Options{Name: "x", Command: []string{"/bin/true"}, Credential: cred}); err == nil {
		t.Error("a credential for a command accepted")
	}
	if _, err := mcpimport.New(mcpimport.Options{Name: "x", URL: "https://a.example/", Credential: cred, CredentialHeader: "X-Bad: y"}); err == nil {
		t.Error("a header name with a colon accepted")
	}
}

// TestHTTPOverlappingCallsKeepLogs: while two calls are in flight, an
// upstream log message cannot be attributed to either (MCP gives it no
// request), so neither call's onLog sees it: one agent never reads a log
// line produced by another's call. It goes to the operator's log.
func TestHTTPOverlappingCallsKeepLogs(t *testing.T) {
	h := newHTTPUpstream(t)
	// Each call logs only once both have reached the upstream, and so once
	// both are in flight here (a call is registered before its request is
	// sent): a log that came while one call alone was in flight is that
	// call's, by design, and not the operator's (the test once raced on it).
	h.together = new(sync.WaitGroup)
	h.together.Add(2)
	// The calls end even if the test fails before it releases them.
	release := sync.OnceFunc(func() { close(h.release) })
	defer release()
	logger, logged := capturingLogger(t)
	u, err := mcpimport.New(mcpimport.Options{Name: "remote", URL: h.url(), Credential: tokenCredential(testToken), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]string{}
	var wg sync.WaitGroup
	for _, who := range []string{"alice", "bob"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := u.Call(ctx, "wait", json.RawMessage(`{"message":"`+who+`"}`), func(e api.LogEntry) {
				mu.Lock()
				seen[who] = append(seen[who], e.Message)
				mu.Unlock()
			}, nil)
			if err != nil {
				t.Error(err)
			}
		}()
	}
	waitFor(t, 10*time.Second, "the upstream's log lines never reached the operator's log", func() bool {
		l := logged()
		return strings.Contains(l, "secret of alice") && strings.Contains(l, "secret of bob")
	})
	release()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for who, msgs := range seen {
		for _, m := range msgs {
			if !strings.Contains(m, "of "+who) {
				t.Errorf("%s's call saw %q", who, m)
			}
		}
	}
}

func TestHTTPCallCancelled(t *testing.T) {
	h := newHTTPUpstream(t)
	u, err := mcpimport.New(mcpimport.Options{Name: "remote", URL: h.url(), Credential: tokenCredential(testToken), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ccancel()
	_, err = u.Call(cctx, "wait", json.RawMessage(`{"message":"x"}`), nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, mcpimport.ErrUnavailable) {
		t.Fatalf("call past its deadline: %v", err)
	}
	waitFor(t, 5*time.Second, "the upstream never saw the cancellation", func() bool { return h.cancelled.Load() == 1 })
	// The upstream is still up.
	if res, err := u.Call(ctx, "echo", json.RawMessage(`{"message":"still"}`), nil, nil); err != nil || string(res.Structured) != `{"echo":"still"}` {
		t.Errorf("after a cancelled call: %+v, %v", res, err)
	}
}

// TestHTTPUpstreamGoneAndBack: an HTTP upstream that goes away is marked
// unavailable (calls say so) and is reconnected once it answers again at the
// same address.
func TestHTTPUpstreamGoneAndBack(t *testing.T) {
	h := newHTTPUpstream(t)
	addr := h.ts.Listener.Addr().String()
	u, err := mcpimport.New(mcpimport.Options{Name: "remote", URL: h.url(), Credential: tokenCredential(testToken), Logger: testLogger(t),
		BackoffInitial: 100 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.ts.CloseClientConnections()
	h.ts.Close()
	// The next call finds out, if the dropped event stream did not already.
	_, err = u.Call(ctx, "echo", json.RawMessage(`{"message":"x"}`), nil, nil)
	if !errors.Is(err, mcpimport.ErrUnavailable) {
		t.Fatalf("call to a gone upstream: %v, want unavailable", err)
	}
	waitFor(t, 5*time.Second, "never marked down", func() bool { return !u.Available() })
	if tools := u.Tools(); len(tools) != 4 || tools[0].Available {
		t.Errorf("tools while down: %+v", tools)
	}
	// The same server again, at the same address.
	h2 := newHTTPUpstreamAt(t, addr)
	waitFor(t, 10*time.Second, "never reconnected", func() bool { return u.Available() })
	res, err := u.Call(ctx, "echo", json.RawMessage(`{"message":"back"}`), nil, nil)
	if err != nil || string(res.Structured) != `{"echo":"back"}` {
		t.Fatalf("after reconnect: %+v, %v", res, err)
	}
	_ = h2
}
