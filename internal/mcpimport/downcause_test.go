package mcpimport_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/mcpimport"
)

// TestWentDownCauseRedacted: why an HTTP upstream went down is the SDK's
// session error, and that can quote the upstream: an event on the
// standalone event stream whose version tag is not "2.0" ends the session
// with the tag quoted in the error. The upstream holds the
// credential and may put it there, so the operator's warning is redacted
// (Options.Redact) like a failed start's.
func TestWentDownCauseRedacted(t *testing.T) {
	h := newHTTPUpstream(t)
	inner := h.ts.Config.Handler
	up := make(chan struct{})
	const quoted = "upstream broke holding " + testToken
	h.ts.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			inner.ServeHTTP(w, r)
			return
		}
		// The client's standalone event stream, opened as the session
		// starts: once the upstream is up, one event the SDK cannot
		// decode, which it quotes.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-up:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte(`data: {"jsonrpc":"` + quoted + `","method":"notifications/message"}` + "\n\n"))
	})
	log, logged := capturingLogger(t)
	u, err := mcpimport.New(mcpimport.Options{Name: "remote", URL: h.url(), Credential: tokenCredential(testToken), Logger: log,
		BackoffInitial: time.Minute, BackoffMax: time.Minute,
		Redact: func(s string) string { return strings.ReplaceAll(s, testToken, "[REDACTED:TOKEN]") }})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	close(up)
	const warning = "MCP upstream went down"
	waitFor(t, 20*time.Second, "no warning that the upstream went down", func() bool { return strings.Contains(logged(), warning) })
	text := logged()
	switch {
	case strings.Contains(text, testToken):
		t.Errorf("the credential the upstream quoted reached the operator's log:\n%.2000s", text)
	case !strings.Contains(text, "upstream broke holding [REDACTED:TOKEN]"):
		t.Errorf("the warning does not carry the upstream's redacted message:\n%.2000s", text)
	}
}
