package maiden_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// exampleConfig writes an agent.toml naming the echo test tool, as a user
// would write one for their own tools.
func exampleConfig() string {
	echo, err := testkit.Build("echo", nil)
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "maiden-example-")
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "agent.toml")
	toml := fmt.Sprintf("version = 1\n\n[tools.echo]\npath = %q\ntimeout_ms = 2000\nmemory_mb = 16\n", echo)
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		log.Fatal(err)
	}
	return path
}

func ExampleHost_Call() {
	cfg, err := config.Load(exampleConfig())
	if err != nil {
		log.Fatal(err) // a config.Errors listing every problem, with lines
	}
	// The default isolation: the tool runs in a worker process, this
	// program re-executed (main, here TestMain, called maiden.WorkerMain
	// first). New fails with ErrNoWorkerMain if it did not.
	h, err := maiden.New(cfg, &maiden.Options{CacheDir: "off"})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(context.Background())

	res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: `{"message":"hi"}`})
	if err != nil {
		log.Fatal(err) // the call could not be made: unknown tool, overloaded, closed, ctx ended
	}
	if !res.OK {
		// The tool's failure, classified; input that is not JSON or misses
		// the schema is one too (kind input), so an agent can fix its call.
		fmt.Println("failed:", res.Error.Kind, res.Error.Message)
		return
	}
	fmt.Println(res.Output)
	// Output: {"message":"hi"}
}

// An embedder's main calls WorkerMain before anything else: when maiden
// starts this program as a worker process, WorkerMain serves the calls and
// exits; otherwise it returns at once and main goes on. Tools you trust may
// instead run in this process, by saying so.
func ExampleWorkerMain() {
	maiden.WorkerMain() // first thing in main

	cfg, err := config.Load(exampleConfig())
	if err != nil {
		log.Fatal(err)
	}
	for _, iso := range []maiden.Isolation{maiden.Workers, maiden.InProcess} {
		h, err := maiden.New(cfg, &maiden.Options{CacheDir: "off", Isolation: iso})
		if err != nil {
			log.Fatal(err)
		}
		res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: `{"message":"hi"}`})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Output)
		h.Close(context.Background())
	}
	// Output:
	// {"message":"hi"}
	// {"message":"hi"}
}
