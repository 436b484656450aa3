package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestCallAnnouncesACompile: on a terminal, maiden call says which
// component it is compiling before the wait (a JS tool's first call was 10
// to 20 silent seconds), in process and in a worker; not when the code
// came from the cache, and never on a pipe or a file. (Not parallel: it
// replaces writerIsTerminal.)
func TestCallAnnouncesACompile(t *testing.T) {
	cfg := agentTOML(t, map[string]string{"echo": ""})
	echo := testkit.Component(t, "echo")
	note := "maiden: compiling " + echo + " for this machine (its first use; the result is cached)\n"
	defer func(f func(io.Writer) bool) { writerIsTerminal = f }(writerIsTerminal)
	for _, iso := range []string{"process", "workers"} {
		t.Run(iso, func(t *testing.T) {
			cache := t.TempDir()
			writerIsTerminal = func(io.Writer) bool { return false }
			if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-isolation", iso, "echo", `{"message":"hi"}`); r.code != exitOK || strings.Contains(r.stderr, "compiling") {
				t.Fatalf("not a terminal: exit %d, stderr %q; want no note", r.code, r.stderr)
			}
			cache = t.TempDir()
			writerIsTerminal = func(io.Writer) bool { return true }
			r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-isolation", iso, "echo", `{"message":"hi"}`)
			if r.code != exitOK || !strings.HasPrefix(r.stderr, note) || strings.Count(r.stderr, "compiling") != 1 {
				t.Fatalf("first call: exit %d, stderr %q; want it to start with %q, once", r.code, r.stderr, note)
			}
			if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-isolation", iso, "echo", `{"message":"hi"}`); r.code != exitOK || strings.Contains(r.stderr, "compiling") {
				t.Errorf("second call: exit %d, stderr %q; want no note (the code is cached)", r.code, r.stderr)
			}
		})
	}
}

// TestServeLogsACompile: maiden serve logs each component it compiles
// (its log is stderr, whatever stderr is), before it says where it
// listens; nothing when the code is in the cache.
func TestServeLogsACompile(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	echo := testkit.Component(t, "echo")
	cache := t.TempDir()
	workerCommand() // the worker binary built (TestMain), before the clock starts
	want := `level=INFO msg="compiling component for this machine (its first use; the result is cached)" path=` + echo
	for i, compiles := range []int{1, 0} {
		ctx, cancel := context.WithCancel(context.Background())
		var stderr testkit.SyncBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"serve", "-config", cfg, "-cache", cache, "-http", "127.0.0.1:0"}, strings.NewReader(""), io.Discard, &stderr)
		}()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(stderr.String(), "maiden serve: MCP over streamable HTTP at") {
			select {
			case code := <-done:
				cancel()
				t.Fatalf("serve %d exited %d: %s", i, code, stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("serve %d did not listen within 60s: %s", i, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		out := stderr.String()
		listen := strings.Index(out, "maiden serve: MCP over")
		if n := strings.Count(out, "compiling"); n != compiles || compiles == 1 && !strings.Contains(out[:listen], want) {
			t.Errorf("serve %d (a cache %s): %d compiles logged, want %d (%q, before it listens):\n%s", i, map[int]string{0: "empty", 1: "filled"}[i], n, compiles, want, out)
		}
	}
}
