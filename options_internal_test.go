package maiden

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/maiden-run/maiden/config"
	"go.opentelemetry.io/otel/trace/noop"
)

type nopObserver struct{}

func (nopObserver) Admission(AdmissionEvent) {}
func (nopObserver) CallDone(CallEvent)       {}
func (nopObserver) Fetch(FetchEvent)         {}

// TestEveryOptionReachesThePipeline: the root and internal/pipeline share
// one Options type (api.Options), and New checks and passes it on; a
// default applied over an embedder's value on the way (an embedder's
// MaxInputBytes replaced by the configuration's, say) would be silently
// ignored. Every field is set here to a value that is not its zero (a new
// field fails the test until it is), and each must arrive as given.
func TestEveryOptionReachesThePipeline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(path, []byte("version = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logger, audit := slog.New(slog.DiscardHandler), slog.New(slog.DiscardHandler)
	lookup := func(string) (string, bool) { return "", false }
	o := Options{
		Logger: logger, CacheDir: "off", MaxCacheBytes: 1 << 20, StatePath: filepath.Join(dir, "state.db"),
		MaxConcurrent: 3, MaxQueued: 5, MaxInputBytes: 7, Resolver: net.DefaultResolver, LookupSecret: lookup,
		Audit: audit, Isolation: InProcess, WorkerCommand: []string{"/nonexistent/maiden"}, Observer: nopObserver{},
		ApprovalWait: time.Minute, ApprovalPoll: time.Second, MCPPinsPath: filepath.Join(dir, "pins.json"),
		TracerProvider: noop.NewTracerProvider(), TracePropagateTo: []string{"api.example.com"},
		OnCompile: func(string) {},
	}
	h, err := New(cfg, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(t.Context())
	got := reflect.ValueOf(h.p.Options())
	want := reflect.ValueOf(o)
	for i := range want.NumField() {
		f := want.Type().Field(i)
		w := want.Field(i)
		if w.IsZero() {
			t.Errorf("Options.%s is not set by this test: give it a value that is not its zero", f.Name)
			continue
		}
		g := got.Field(i)
		if w.Kind() == reflect.Func {
			if g.IsNil() || g.Pointer() != w.Pointer() {
				t.Errorf("Options.%s did not reach the pipeline", f.Name)
			}
			continue
		}
		if !reflect.DeepEqual(g.Interface(), w.Interface()) {
			t.Errorf("Options.%s reached the pipeline as %v, want %v", f.Name, g.Interface(), w.Interface())
		}
	}
}
