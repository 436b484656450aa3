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
// notifications/message, in order, from its own goroutine.
type logForwarder struct {
	ch      chan maiden.LogEntry
	done    chan struct{}
	mu      sync.Mutex
	dropped int
	closed  bool
}

func startLogForwarder(ctx context.Context, ss *mcp.ServerSession, tool string, log *slog.Logger) *logForwarder {
	f := &logForwarder{ch: make(chan maiden.LogEntry, logQueue), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for e := range f.ch {
			if ss == nil {
				continue
			}
			level, ok := mcpLevels[string(e.Level)]
			if !ok {
				level = "info"
			}
			err := ss.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: tool, Data: e.Message})
			if err != nil {
				log.Debug("log notification failed", "tool", tool, "error", err)
			}
		}
		f.mu.Lock()
		dropped := f.dropped
		f.mu.Unlock()
		if dropped > 0 && ss != nil {
			_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: tool,
				Data: fmt.Sprintf("%d log lines not sent: the client was not reading them fast enough (they are in the call's log)", dropped)})
		}
	}()
	return f
}

// send queues a line; it never blocks.
func (f *logForwarder) send(e maiden.LogEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
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
	close(f.ch)
	f.mu.Unlock()
	<-f.done
}
