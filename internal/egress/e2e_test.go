package egress

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestEndToEnd runs real components (the WAT and the JavaScript fetcher)
// calling http-fetch through the gate against a real TLS server.
func TestEndToEnd(t *testing.T) {
	e := newEnv(t)
	e.secrets["API_TOKEN"] = testSecret
	e.secrets["STOLEN"] = "not-for-this-tool"
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			io.WriteString(w, "auth="+r.Header.Get("Authorization"))
		case "/redirect":
			w.Header().Set("Location", "http://169.254.169.254/latest/meta-data/")
			w.WriteHeader(http.StatusFound)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}
	}, false)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t, s.port))
	sb, err := sandbox.New(&sandbox.Options{CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })

	for _, tool := range []string{"fetcher", "js/fetcher"} {
		path := testkit.Component(t, tool)
		for _, tc := range []struct {
			name    string
			input   string
			timeout time.Duration
			output  string       // want this output, or
			failure string       // this tool error, or
			kind    sandbox.Kind // this failure kind
		}{
			{name: "credential attached, echo redacted",
				input:  "CRED=API_TOKEN " + urlFor(s, "api.example.com", "/echo"),
				output: "200 auth=Bearer [REDACTED:API_TOKEN]"},
			{name: "redirect returned, not followed",
				input:  urlFor(s, "api.example.com", "/redirect"),
				output: "302 "},
			{name: "host not allow-listed",
				input:   "https://evil.example/",
				failure: `denied: host "evil.example" is not in this tool's http_allow (rule: allowlist)`},
			{name: "undeclared credential",
				input:   "CRED=STOLEN " + urlFor(s, "api.example.com", "/echo"),
				failure: `denied: credential "STOLEN" is not in this tool's secrets (rule: credential-undeclared)`},
			{name: "loopback literal",
				input:   "https://127.0.0.1/",
				failure: `denied: host 127.0.0.1 is an IP address; an IP literal must itself be listed in this tool's http_allow (rule: ip-literal)`},
			{name: "deadline while waiting",
				input:   urlFor(s, "api.example.com", "/slow"),
				timeout: 500 * time.Millisecond,
				kind:    sandbox.KindDeadline},
		} {
			t.Run(tool+"/"+tc.name, func(t *testing.T) {
				lim := sandbox.Limits{Timeout: 20 * time.Second, Memory: 64 << 20}
				if tc.timeout > 0 {
					lim.Timeout = tc.timeout
				}
				out, err := sb.Execute(context.Background(), sandbox.Call{
					Path: path, Limits: lim, Input: tc.input,
					Fetch: sandboxFetch(e.gate, p), Redact: e.gate.Redactor(p),
				})
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tc.kind != "":
					if out.Failure == nil || out.Failure.Kind != tc.kind {
						t.Fatalf("got %+v, want a %s failure", out, tc.kind)
					}
				case tc.failure != "":
					if out.Failure == nil || out.Failure.Kind != sandbox.KindTool || out.Failure.Message != tc.failure {
						t.Fatalf("got %+v\nwant tool error %q", out, tc.failure)
					}
				default:
					if out.Failure != nil || out.Output != tc.output {
						t.Fatalf("got %+v\nwant output %q", out, tc.output)
					}
				}
				for _, l := range out.Logs {
					if strings.Contains(l.Message, "3f9a") {
						t.Errorf("log line carries the secret: %q", l.Message)
					}
				}
			})
		}
	}
	if strings.Contains(e.audit.raw(), "3f9a") {
		t.Error("audit log holds the secret")
	}
}

// TestEndToEnd2MiB measures a 2 MiB response crossing into a WAT tool and
// back out as its output. It reports the time; it does not judge it.
func TestEndToEnd2MiB(t *testing.T) {
	e := newEnv(t)
	body := bytes.Repeat([]byte("abcdefgh"), (2<<20)/8)
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write(body) }, false)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t, s.port))
	sb, err := sandbox.New(&sandbox.Options{CacheDir: testkit.CompileCache(t), MaxOutputBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	path := testkit.Component(t, "fetcher")
	u := urlFor(s, "api.example.com", "/")

	// Warm up: compile, first connection.
	call := sandbox.Call{Path: path, Limits: sandbox.Limits{Timeout: 60 * time.Second, Memory: 64 << 20}, Input: u,
		Fetch: sandboxFetch(e.gate, p), Redact: e.gate.Redactor(p)}
	if _, err := sb.Execute(context.Background(), call); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, get(u))
	gateOnly := time.Since(start)
	if ferr != nil || len(resp.Body) != len(body) {
		t.Fatalf("gate: %v", ferr)
	}

	const runs = 3
	var total time.Duration
	for range runs {
		out, err := sb.Execute(context.Background(), call)
		if err != nil || out.Failure != nil {
			t.Fatalf("%v %+v", err, out.Failure)
		}
		if len(out.Output) != len("200 ")+len(body) || !strings.HasPrefix(out.Output, "200 abcdefgh") {
			t.Fatalf("output of %d bytes, want %d", len(out.Output), len("200 ")+len(body))
		}
		total += out.Duration
	}
	t.Logf("2 MiB response: gate alone %v; through the WAT fetcher (fetch + list<u8> into the guest + string out) %v per call (mean of %d)",
		gateOnly.Round(time.Microsecond), (total / runs).Round(time.Microsecond), runs)
}

// sandboxFetch adapts the gate to the sandbox, as the root package's
// egress.go does (egress itself imports no runner; a test of the whole path
// lives in the root package).
func sandboxFetch(g *Gate, p *Policy) sandbox.FetchFunc {
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		hs := make([]Header, len(req.Headers))
		for i, h := range req.Headers {
			hs[i] = Header(h)
		}
		resp, ferr := g.Fetch(ctx, p, Request{Method: req.Method, URL: req.URL, Headers: hs, Body: req.Body,
			Credential: req.Credential, HasCredential: req.HasCredential})
		if ferr != nil {
			return nil, &sandbox.FetchError{Kind: sandbox.FetchErrorKind(ferr.Kind), Message: ferr.Message}
		}
		out := make([]sandbox.Header, len(resp.Headers))
		for i, h := range resp.Headers {
			out[i] = sandbox.Header(h)
		}
		return &sandbox.FetchResponse{Status: resp.Status, Headers: out, Body: resp.Body}, nil
	}
}
