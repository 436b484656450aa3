//go:build jaeger

// The collector test is behind the jaeger build tag until its cold build
// (Jaeger's all-in-one: a few thousand packages) has been measured and
// budgeted for make test: go test -tags jaeger -run TestSpansReachJaeger .

package maiden_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/trace/otlp"
)

// jaeger is a Jaeger all-in-one (v2, OpenTelemetry-collector based, memory
// storage) on loopback ports of its own, started for the test and stopped
// by its PID.
type jaeger struct {
	otlpHTTP, otlpGRPC, query string // host:port
	log                       *testkit.SyncBuffer
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := testkit.ModuleBinary(t, "./internal/trace/otlp/testdata/jaeger", "github.com/jaegertracing/jaeger/cmd/jaeger")
	j := &jaeger{otlpHTTP: freePort(t), otlpGRPC: freePort(t), query: freePort(t), log: &testkit.SyncBuffer{}}
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 1000
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %q
    grpc:
      endpoint: %q
receivers:
  otlp:
    protocols:
      http:
        endpoint: %q
      grpc:
        endpoint: %q
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, j.query, freePort(t), j.otlpHTTP, j.otlpGRPC)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", path)
	cmd.Stdout, cmd.Stderr = j.log, j.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	// Ready when its query API answers (and its receivers are up: they
	// start before the extensions report ready).
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + j.query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return j
			}
		}
		select {
		case <-exited:
			t.Fatalf("jaeger exited:\n%s", j.log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger's query API did not answer in 60 s:\n%s", j.log.String())
		}
	}
}

// jaegerTrace is what Jaeger's query API says of a trace.
type jaegerTrace struct {
	Data []struct {
		Spans []struct {
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			References    []struct {
				RefType string `json:"refType"`
				TraceID string `json:"traceID"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			Tags []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
		} `json:"spans"`
	} `json:"data"`
}

// TestSpansReachJaeger: with the standard OTLP variables set (http/protobuf,
// then grpc), a call's spans arrive at a real collector, Jaeger's
// all-in-one on loopback, under the client's trace ID: maiden.call a child
// of the client's span, the stages, the middleware layer, the run and the
// http-fetch with its host and status; and nothing Jaeger stored of the
// trace holds the secret, the query or the output.
func TestSpansReachJaeger(t *testing.T) {
	j := startJaeger(t)
	for i, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
			endpoint := "http://" + j.otlpHTTP
			if proto == "grpc" {
				endpoint = "http://" + j.otlpGRPC
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			t.Setenv("OTEL_SERVICE_NAME", "maiden-test")
			tp, stop, err := otlp.FromEnv(context.Background())
			if err != nil || tp == nil {
				t.Fatalf("FromEnv: %v, %v", tp, err)
			}
			traceID := fmt.Sprintf("%032x", 0xabc0+i)
			w := newTraceWorldWith(t, tp, nil)
			res := w.call(t, "api.example.com", "00-"+traceID+"-"+clientSpanID+"-01")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := stop(ctx); err != nil { // flushes the batch
				t.Fatalf("exporting: %v\njaeger:\n%s", err, j.log.String())
			}

			want := []string{"maiden.call", "maiden.admission", "maiden.decision", "maiden.middleware", "maiden.middleware.layer", "maiden.run", "maiden.http_fetch"}
			var tr jaegerTrace
			var raw []byte
			deadline := time.Now().Add(30 * time.Second)
			for {
				resp, err := http.Get("http://" + j.query + "/api/traces/" + traceID)
				if err == nil {
					raw, _ = readAll(resp)
					tr = jaegerTrace{}
					json.Unmarshal(raw, &tr)
				}
				if len(tr.Data) == 1 && len(tr.Data[0].Spans) >= 13 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the trace did not arrive in 30 s: %s\njaeger:\n%s", raw, j.log.String())
				}
				time.Sleep(50 * time.Millisecond) // polling Jaeger's store: its ingestion has no event to wait on
			}
			names := map[string]int{}
			for _, s := range tr.Data[0].Spans {
				names[s.OperationName]++
				tags := map[string]string{}
				for _, tg := range s.Tags {
					tags[tg.Key] = fmt.Sprint(tg.Value)
				}
				switch s.OperationName {
				case "maiden.call":
					if len(s.References) != 1 || s.References[0].SpanID != clientSpanID || s.References[0].TraceID != traceID {
						t.Errorf("maiden.call's references %+v, want the client's span %s", s.References, clientSpanID)
					}
					if tags["maiden.tool"] != "fetcher" || tags["maiden.outcome"] != "ok" {
						t.Errorf("maiden.call tags %v", tags)
					}
				case "maiden.http_fetch":
					if tags["server.address"] != "api.example.com" || tags["http.response.status_code"] != "200" {
						t.Errorf("maiden.http_fetch tags %v", tags)
					}
				}
			}
			for _, n := range want {
				if names[n] == 0 {
					t.Errorf("no %s span in Jaeger's trace: %v", n, names)
				}
			}
			for _, secret := range []string{tokenValue, "query-value", res.Output} {
				if bytes.Contains(raw, []byte(secret)) {
					t.Errorf("Jaeger's trace holds %q", secret)
				}
			}
		})
	}
}

func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(resp.Body)
	return b.Bytes(), err
}
