// Command maiden runs AI-agent tools as sandboxed WebAssembly components.
//
//	maiden check  [-config agent.toml]
//	maiden tools  [-config agent.toml] [-json]
//	maiden call   [-config agent.toml] [-json] TOOL [INPUT | -]
//	maiden serve  [-config agent.toml] [-http ADDR]
//	maiden new    go|js DIR
//	maiden build  [-o OUT.wasm] [-watch] [DIR]
//
// See the README for the exit codes and the -json envelope.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/maiden-run/maiden"
)

func main() {
	// A worker process (maiden re-executed by itself to run guest code)
	// serves its parent and exits here.
	maiden.WorkerMain()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
