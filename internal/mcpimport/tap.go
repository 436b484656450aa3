//lint:file-ignore SA1019 MCP logging is deprecated upstream (SEP-2577) but still how upstream servers send logs, which maiden relays

package mcpimport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/capread"
	"github.com/maiden-run/maiden/internal/progress"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK hands notifications to their handlers on a goroutine of their own
// while it delivers a response to the waiting call directly, so a progress or
// log notification the upstream sent before its response could reach a
// handler after Call returned. maiden instead taps the messages where they
// are read, in the order the upstream sent them: on a stdio connection as
// each message is decoded, on streamable HTTP as the SSE stream's bytes pass
// to the SDK. A call's notifications are therefore delivered before Call
// returns.

const (
	methodProgress = "notifications/progress"
	methodLog      = "notifications/message"
)

// tapTransport wraps a stdio transport's connection.
type tapTransport struct {
	inner mcp.Transport
	u     *Upstream
	gen   uint64
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, u: t.u, gen: t.gen}, nil
}

type tapConn struct {
	mcp.Connection
	u   *Upstream
	gen uint64
}

// writeGrace is how long a write to the upstream's stdin may go on after
// its context ended (a deadline, a cancellation) before the connection is
// judged wedged and closed.
const writeGrace = time.Second

// Write honours ctx, which the SDK's stdio connection does not: its write
// to the command's stdin blocks while the upstream does not read it, and
// would hold the call (and every later write, behind the connection's
// lock) past its deadline. When ctx ends first, Write returns its error at
// once and leaves the write running; one still blocked writeGrace later
// means the upstream has not read its stdin for that long, and the
// connection is closed, which ends the write and the session and has the
// upstream restarted. (A write that finishes within the grace leaves the
// session alone, so an agent cancelling a call cannot restart an upstream
// other agents use.)
func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if ctx.Done() == nil {
		return c.Connection.Write(ctx, msg)
	}
	done := make(chan error, 1)
	go func() { done <- c.Connection.Write(ctx, msg) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	wedged := time.AfterFunc(writeGrace, func() {
		c.u.log.Warn("MCP upstream does not read its stdin; closing the connection", "grace", writeGrace)
		_ = c.Connection.Close()
	})
	go func() {
		<-done
		wedged.Stop()
	}()
	return ctx.Err()
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && !req.IsCall() {
		if req.Method == methodProgress || req.Method == methodLog {
			c.u.dispatch(c.gen, req.Method, req.Params)
			// Consumed here; the SDK has no handler for these.
		}
	}
	return msg, err
}

// sseTapTransport wraps the HTTP transport of one session: server-sent
// event streams are read through an sseTap.
type sseTapTransport struct {
	base http.RoundTripper
	u    *Upstream
	gen  uint64
}

func (t *sseTapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		resp.Body = &sseTap{rc: resp.Body, u: t.u, gen: t.gen}
	} else {
		// The SDK reads any other answer (application/json: one message)
		// whole, with no limit of its own: bound it as a message.
		resp.Body = capread.New(resp.Body, int64(t.u.opts.MaxMessageBytes),
			fmt.Errorf("an HTTP answer of the MCP upstream is over the %d-byte message cap", t.u.opts.MaxMessageBytes))
	}
	return resp, nil
}

// maxTapEvent bounds an event the tap decodes; a larger one passes through
// undecoded (it is not a notification maiden relays, or is not one worth
// relaying whole).
const maxTapEvent = 1 << 20

// sseTap parses the SSE stream as the SDK reads it and dispatches each
// complete event's progress or log notification before returning the bytes
// that completed it.
type sseTap struct {
	rc       io.ReadCloser
	u        *Upstream
	gen      uint64
	line     []byte // the current line, without its end
	data     []byte // the current event's data lines, joined by \n
	overflow bool
}

func (s *sseTap) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	for _, b := range p[:n] {
		s.feed(b)
	}
	return n, err
}

func (s *sseTap) Close() error { return s.rc.Close() }

func (s *sseTap) feed(b byte) {
	if b != '\n' {
		if len(s.line) < maxTapEvent {
			s.line = append(s.line, b)
		} else {
			s.overflow = true
		}
		return
	}
	line := bytes.TrimSuffix(s.line, []byte{'\r'})
	s.line = s.line[:0]
	if len(line) == 0 { // end of event
		if !s.overflow && len(s.data) > 0 {
			s.event(s.data)
		}
		s.data = s.data[:0]
		s.overflow = false
		return
	}
	if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		v = bytes.TrimPrefix(v, []byte{' '})
		if len(s.data)+len(v)+1 > maxTapEvent {
			s.overflow = true
			return
		}
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, v...)
	}
}

func (s *sseTap) event(data []byte) {
	// Cheap test before decoding: only notifications maiden relays.
	if !bytes.Contains(data, []byte(methodProgress)) && !bytes.Contains(data, []byte(methodLog)) {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &m) != nil || m.ID != nil {
		return
	}
	if m.Method == methodProgress || m.Method == methodLog {
		s.u.dispatch(s.gen, m.Method, m.Params)
	}
}

// dispatch relays one progress or log notification of the session gen.
func (u *Upstream) dispatch(gen uint64, method string, params json.RawMessage) {
	switch method {
	case methodProgress:
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		tok, ok := p.ProgressToken.(string)
		if !ok {
			return
		}
		u.mu.Lock()
		c := u.calls[tok]
		u.mu.Unlock()
		if c == nil || c.gen != gen || c.onProgress == nil {
			return
		}
		// Whole: the caller redacts, then cuts (the progress relay, at
		// progress.MaxMessage).
		c.onProgress(Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
	case methodLog:
		var p mcp.LoggingMessageParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		var msg string
		if s, ok := p.Data.(string); ok {
			msg = s
		} else if b, err := json.Marshal(p.Data); err == nil {
			msg = string(b)
		}
		if p.Logger != "" {
			msg = p.Logger + ": " + msg
		}
		// Whole: a call's onLog redacts, then cuts (MaxLogMessage), and
		// so does logToOperator.
		entry := api.LogEntry{Level: mapLevel(p.Level), Source: api.SourceLog, Message: msg}
		u.mu.Lock()
		var sole *call
		if len(u.calls) == 1 {
			for _, c := range u.calls {
				if c.gen == gen {
					sole = c
				}
			}
		}
		u.mu.Unlock()
		if sole != nil && sole.onLog != nil {
			sole.onLog(entry)
			return
		}
		u.logToOperator(string(p.Level), msg)
	}
}

// opLogPerSecond bounds the upstream's log messages that reach the
// operator's log (those no single call owns) in one second; the rest are
// counted and said in one line when the next second's first one is logged.
// Nothing else bounds them: an idle upstream may send as many as it likes.
const opLogPerSecond = 20

type opLogPace struct {
	mu      sync.Mutex
	second  int64 // the Unix second n counts
	n       int
	dropped int
}

// logToOperator logs one of the upstream's log messages no call owns,
// redacted (Options.Redact) and paced (opLogPerSecond).
func (u *Upstream) logToOperator(level, msg string) {
	pace := &u.opLog
	now := time.Now().Unix()
	pace.mu.Lock()
	if now != pace.second {
		pace.second, pace.n = now, 0
	}
	if pace.n >= opLogPerSecond {
		pace.dropped++
		pace.mu.Unlock()
		return
	}
	pace.n++
	dropped := pace.dropped
	pace.dropped = 0
	pace.mu.Unlock()
	if dropped > 0 {
		u.log.Warn("MCP upstream log messages dropped", "dropped", dropped, "limit_per_second", opLogPerSecond)
	}
	if u.opts.Redact != nil {
		msg = u.opts.Redact(msg)
	}
	msg = progress.CapMessage(msg, MaxLogMessage)
	u.log.Info("MCP upstream log message", "level", level, "message", msg)
}
