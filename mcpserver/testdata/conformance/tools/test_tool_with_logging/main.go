// test_tool_with_logging: the conformance suite's tools-call-with-logging
// tool. It writes three info lines about 50 ms apart, as the scenario asks;
// maiden forwards them to the client as notifications/message.
package main

import (
	"context"
	"time"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type tool struct{}

func (tool) Describe() string {
	return "Logs three info lines about 50 ms apart, then returns (MCP conformance suite)."
}

func (tool) Schema() string { return `{"type":"object","properties":{}}` }

func (tool) Execute(ctx context.Context, in []byte) ([]byte, error) {
	maiden.Log(maiden.LevelInfo, "Tool execution started")
	time.Sleep(50 * time.Millisecond)
	maiden.Log(maiden.LevelInfo, "Tool processing data")
	time.Sleep(50 * time.Millisecond)
	maiden.Log(maiden.LevelInfo, "Tool execution completed")
	return []byte("Logging tool finished."), nil
}

func init() { maiden.Register(tool{}) }

func main() {}
