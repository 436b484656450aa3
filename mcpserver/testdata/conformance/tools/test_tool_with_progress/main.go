// test_tool_with_progress: the conformance suite's tools-call-with-progress
// tool. A maiden tool cannot send progress itself; the server reports it for
// any call that runs longer than its progress interval (one second in
// maiden serve) when the client sent a progress token. So this tool only
// sleeps long enough for three reports (at 1, 2 and 3 s), with a margin.
package main

import (
	"context"
	"time"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type tool struct{}

func (tool) Describe() string {
	return "Runs for about 3.7 seconds, so that maiden reports its progress three times (MCP conformance suite)."
}

func (tool) Schema() string { return `{"type":"object","properties":{}}` }

func (tool) Execute(ctx context.Context, in []byte) ([]byte, error) {
	time.Sleep(3700 * time.Millisecond)
	return []byte("Progress tool finished."), nil
}

func init() { maiden.Register(tool{}) }

func main() {}
