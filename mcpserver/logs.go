// The issue this serves asks for tool logs as MCP logging notifications;
// the SDK marks logging deprecated as of protocol 2026-07-28 (SEP-2577), but
// it stays functional for at least a year and clients use it today.
//
//lint:file-ignore SA1019 MCP logging is deprecated upstream but still the way clients receive tool logs

package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/maiden-run/maiden"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpLevels maps a tool's log level to MCP's (syslog) levels.
var mcpLevels = map[string]mcp.LoggingLevel{
	"debug": "debug",
	"info":  "info",
	"warn":  "warning",
	"error": "error",
}

// logQueue is how many log lines may wait to be sent for one call. The tool
// writes them on its own thread and must never wait for the network.
const logQueue = 256

// logForwarder sends one call's log lines to the client as
// notifications/message, in order, from its own goroutine. The goroutine
// and its queue are made at the call's first log line: most calls log
// nothing, and for them a goroutine to start and wait for would be a
// scheduling round trip on every call's way back to the client.
type logForwarder struct {
	ctx  context.Context
	ss   *mcp.ServerSession
	tool string
	log  *slog.Logger

	mu      sync.Mutex
	ch      chan maiden.LogEntry // nil until the first line
	done    chan struct{}        // closed when the goroutine has sent everything
	dropped int
	closed  bool
}

func startLogForwarder(ctx context.Context, ss *mcp.ServerSession, tool string, log *slog.Logger) *logForwarder {
	return &logForwarder{ctx: ctx, ss: ss, tool: tool, log: log}
}

// run sends the lines queued on ch until it is closed.
func (f *logForwarder) run(ch <-chan maiden.LogEntry, done chan<- struct{}) {
	defer close(done)
	for e := range ch {
		level, ok := mcpLevels[string(e.Level)]
		if !ok {
			level = "info"
		}
		err := f.ss.Log(f.ctx, &mcp.LoggingMessageParams{Level: level, Logger: f.tool, Data: e.Message})
		if err != nil {
			f.log.Debug("log notification failed", "tool", f.tool, "error", err)
		}
	}
	f.mu.Lock()
	dropped := f.dropped
	f.mu.Unlock()
	if dropped > 0 {
		_ = f.ss.Log(f.ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: f.tool,
			Data: fmt.Sprintf("%d log lines not sent: the client was not reading them fast enough (they are in the call's log)", dropped)})
	}
}

// send queues a line; it never blocks. Without a session there is no
// client to send it to.
func (f *logForwarder) send(e maiden.LogEntry) {
	if f.ss == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	if f.ch == nil {
		f.ch, f.done = make(chan maiden.LogEntry, logQueue), make(chan struct{})
		go f.run(f.ch, f.done)
	}
	select {
	case f.ch <- e:
	default:
		f.dropped++
	}
}

// finish waits until every queued line was sent, so a call's log
// notifications reach the client before its result.
func (f *logForwarder) finish() {
	f.mu.Lock()
	f.closed = true
	done := f.done
	if f.ch != nil {
		close(f.ch)
	}
	f.mu.Unlock()
	if done != nil {
		<-done
	}
}
