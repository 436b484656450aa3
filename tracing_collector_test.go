// TestSpansReachACollector runs in the default suite. Its collector is built
// once into the testkit cache (testkit.ModuleBinary): make test's first step
// (scripts/deps) starts that build in the background, while the machine
// waits on apt-get, and the test builds it itself when it is absent (a
// developer's go test). Its cold build and what it shares with maiden's own
// build: docs/observability.md, "Tested against a real collector".

package maiden_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/trace/otlp"
)

// collector is an OpenTelemetry Collector (the minimal distribution in
// internal/trace/otlp/testdata/otelcol: the OTLP receiver and the debug
// exporter) on loopback ports it picked itself, started for the test and
// stopped by its PID. Every span it receives is written, with its IDs,
// parent and attributes, to spans.
type collector struct {
	http, grpc string // host:port of its OTLP receivers
	spans      string // the debug exporter's file
	log        *testkit.SyncBuffer
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	bin := testkit.ModuleBinary(t, "./internal/trace/otlp/testdata/otelcol", "github.com/maiden-run/maiden/internal/trace/otlp/testdata/otelcol")
	dir := t.TempDir()
	c := &collector{spans: filepath.Join(dir, "spans.txt"), log: &testkit.SyncBuffer{}}
	// The receivers listen on port 0, where the kernel says, and log it, so
	// no port is chosen here and then lost to another process. The
	// exporter's queue is off: the receiver answers an export once the
	// spans are written, so the exporter's acknowledgement is the event to
	// wait on (the collector's main.go).
	cmd := exec.Command(bin, "-spans", c.spans)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = c.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Ready is the collector's own log line "Everything is ready", after
	// the receivers' lines naming their addresses; a closed stderr (the
	// collector exited) ends the wait too.
	ready := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stderr, c.log))
		signalled := false
		for sc.Scan() {
			var line struct{ Msg, Endpoint string }
			if json.Unmarshal(sc.Bytes(), &line) != nil || signalled {
				continue
			}
			switch line.Msg {
			case "Starting HTTP server":
				c.http = line.Endpoint
			case "Starting GRPC server":
				c.grpc = line.Endpoint
			case "Everything is ready. Begin running and processing data.":
				signalled = true
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("the collector exited before it was ready:\n%s", c.log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the collector was not ready in 60 s:\n%s", c.log.String())
	}
	if c.http == "" || c.grpc == "" {
		t.Fatalf("the collector did not say where it listens (http %q, grpc %q):\n%s", c.http, c.grpc, c.log.String())
	}
	return c
}

// collectedSpan is one span as the debug exporter wrote it.
type collectedSpan struct {
	traceID, parentID, id, name string
	attrs                       map[string]string // key → the value as written: Str(x), Int(200)
}

var (
	debugField = regexp.MustCompile(`^\s+(Trace ID|Parent ID|ID|Name)\s*: (.*)$`)
	debugAttr  = regexp.MustCompile(`^\s+-> ([^:]+): (.*)$`)
)

// parseDebugSpans reads the debug exporter's detailed output: a "Span #n"
// line, its fields, then its attributes; events and links (deeper) and
// resources (before the spans) are not attributes of a span here.
func parseDebugSpans(out string) []collectedSpan {
	var spans []collectedSpan
	var cur *collectedSpan
	inAttrs := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Span #"):
			spans = append(spans, collectedSpan{attrs: map[string]string{}})
			cur, inAttrs = &spans[len(spans)-1], false
		case cur == nil:
		case strings.HasPrefix(line, "ResourceSpans #"), strings.HasPrefix(line, "ScopeSpans #"):
			cur = nil
		case line == "Attributes:":
			inAttrs = true
		case strings.HasPrefix(line, "Events:"), strings.HasPrefix(line, "Links:"):
			inAttrs = false
		case inAttrs && debugAttr.MatchString(line):
			m := debugAttr.FindStringSubmatch(line)
			cur.attrs[m[1]] = m[2]
		case debugField.MatchString(line):
			m := debugField.FindStringSubmatch(line)
			switch m[1] {
			case "Trace ID":
				cur.traceID = m[2]
			case "Parent ID":
				cur.parentID = m[2]
			case "ID":
				cur.id = m[2]
			case "Name":
				cur.name = m[2]
			}
		}
	}
	return spans
}

// TestSpansReachACollector: a call's spans, exported through the code
// maiden serve uses (otlp.New, configured by the standard OTLP variables
// and by agent.toml's [trace]) over http/protobuf and over grpc, arrive at
// a real OpenTelemetry Collector on loopback under the client's trace ID:
// maiden.call a child of the client's span, the stages, the middleware
// layer, the run and the http-fetch with its host and status; and nothing
// the collector received holds the secret, the URL's query or the output.
func TestSpansReachACollector(t *testing.T) {
	c := startCollector(t)
	n := 0
	for _, from := range []string{"env", "agent.toml"} {
		for _, proto := range []string{"http/protobuf", "grpc"} {
			n++
			traceID := fmt.Sprintf("%032x", 0xc011ec7000+n)
			t.Run(from+"/"+strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
				endpoint := "http://" + c.http
				if proto == "grpc" {
					endpoint = "http://" + c.grpc
				}
				getenv := func(string) string { return "" }
				settings := otlp.Settings{Endpoint: endpoint, Protocol: proto}
				if from == "env" {
					t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
					t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
					t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
					getenv, settings = os.Getenv, otlp.Settings{}
				}
				tp, stop, err := otlp.New(context.Background(), settings, getenv)
				if err != nil || tp == nil {
					t.Fatalf("otlp.New: %v, %v", tp, err)
				}
				w := newTraceWorldWith(t, tp, nil)
				res := w.call(t, "api.example.com", "00-"+traceID+"-"+clientSpanID+"-01")
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				// Shutdown flushes the batch and returns once the collector
				// acknowledged it, which (queue off) is after it wrote them.
				if err := stop(ctx); err != nil {
					t.Fatalf("exporting: %v\ncollector:\n%s", err, c.log.String())
				}
				raw, err := os.ReadFile(c.spans)
				if err != nil {
					t.Fatal(err)
				}
				var mine []collectedSpan
				for _, s := range parseDebugSpans(string(raw)) {
					if s.traceID == traceID {
						mine = append(mine, s)
					}
				}
				names := map[string]int{}
				for _, s := range mine {
					names[s.name]++
					switch s.name {
					case "maiden.call":
						if s.parentID != clientSpanID {
							t.Errorf("maiden.call's parent %q, want the client's span %s", s.parentID, clientSpanID)
						}
						if s.attrs["maiden.tool"] != "Str(fetcher)" || s.attrs["maiden.outcome"] != "Str(ok)" {
							t.Errorf("maiden.call's attributes %v", s.attrs)
						}
					case "maiden.http_fetch":
						if s.attrs["server.address"] != "Str(api.example.com)" || s.attrs["http.response.status_code"] != "Int(200)" {
							t.Errorf("maiden.http_fetch's attributes %v", s.attrs)
						}
					}
				}
				for _, want := range []string{"maiden.call", "maiden.admission", "maiden.decision", "maiden.middleware", "maiden.middleware.layer", "maiden.run", "maiden.http_fetch"} {
					if names[want] == 0 {
						t.Errorf("no %s span under trace %s at the collector: %v\ncollector wrote:\n%s", want, traceID, names, raw)
					}
				}
				for _, secret := range []string{tokenValue, "query-value", res.Output} {
					if bytes.Contains(raw, []byte(secret)) {
						t.Errorf("the collector received %q", secret)
					}
				}
			})
		}
	}
}
