package sandbox

import (
	"bytes"
	"fmt"
	"github.com/maiden-run/maiden/api"
	"sync"
	"unicode/utf8"
)

// Level is the severity of a log line (api.Level).
type Level = api.Level

// Levels, in the contract's order.
const (
	LevelDebug = api.LevelDebug
	LevelInfo  = api.LevelInfo
	LevelWarn  = api.LevelWarn
	LevelError = api.LevelError
)

// Log sources: what produced a line.
const (
	SourceLog    = api.SourceLog
	SourceStdout = api.SourceStdout
	SourceStderr = api.SourceStderr
	SourceHost   = api.SourceHost
)

// LogEntry is one line of a call's log (api.LogEntry).
type LogEntry = api.LogEntry

// logBuffer collects a call's log within a byte budget. Lines past the
// budget are counted, not kept, and one marker says how much was dropped:
// a tool cannot make the host hold more than the budget, and the reader
// still learns that something was lost. Each line costs its bytes and
// logLineCost more, so that the budget bounds the lines too: an empty line
// costs the host an entry (and the agent a notification) all the same.
type logBuffer struct {
	mu       sync.Mutex
	budget   int
	used     int
	entries  []LogEntry
	dropped  int // lines
	droppedB int // bytes
	partial  [3]bytes.Buffer
	redact   func(string) string
	notify   func(LogEntry)
}

func newLogBuffer(budget int, redact func(string) string, notify func(LogEntry)) *logBuffer {
	return &logBuffer{budget: budget, redact: redact, notify: notify}
}

// logLineCost is what a log line costs the budget besides its bytes: about
// what the host holds for its entry (LogEntry's three string headers are
// 48 bytes) and what its JSON envelope costs the agent. With the default
// 64 KiB budget a call keeps at most 4,088 lines (see logMarkerRoom); without it a tool kept
// every empty line it wrote (millions within a deadline, by the host's log
// or a stdout of newlines), each an entry in the host's memory and a
// notification to the agent.
const logLineCost = 16

// logMarkerRoom is the part of the budget a tool's lines leave for the
// truncation marker (at most ~110 bytes with its cost), so that the log a
// call returns, marker included, is within the budget. A worker's sandbox
// passes its marker on as a host line, which the parent's collector keeps
// in that room: the count of dropped lines the caller reads is the
// worker's.
const logMarkerRoom = 128

func (b *logBuffer) add(level Level, source, msg string) {
	b.mu.Lock()
	if b.dropped > 0 {
		// Past the budget every line is dropped: no need to validate or
		// redact one, which a tool could make cost the host a copy of the
		// largest string it may pass, again and again.
		b.dropped++
		b.droppedB += len(msg)
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	if !utf8.ValidString(msg) {
		msg = string(bytes.ToValidUTF8([]byte(msg), []byte("\uFFFD")))
	}
	if b.redact != nil {
		msg = b.redact(msg)
	}
	limit := b.budget - logMarkerRoom
	if source == SourceHost {
		limit = b.budget
	}
	b.mu.Lock()
	if b.dropped > 0 || b.used+len(msg)+logLineCost > limit {
		b.dropped++
		b.droppedB += len(msg)
		b.mu.Unlock()
		return
	}
	e := LogEntry{Level: level, Source: source, Message: msg}
	b.used += len(msg) + logLineCost
	b.entries = append(b.entries, e)
	b.mu.Unlock()
	if b.notify != nil {
		b.notify(e)
	}
}

// write takes raw WASI output and logs it line by line; an unterminated
// tail waits for more output or for flush.
func (b *logBuffer) write(fd int, p []byte) {
	if fd != 1 && fd != 2 {
		return
	}
	level, source := LevelInfo, SourceStdout
	if fd == 2 {
		level, source = LevelWarn, SourceStderr
	}
	b.mu.Lock()
	buf := &b.partial[fd]
	// Never hold more than the budget in a partial line either.
	room := b.budget - buf.Len()
	if room < 0 {
		room = 0
	}
	if len(p) > room {
		b.droppedB += len(p) - room
		p = p[:room]
	}
	buf.Write(p)
	var lines []string
	for {
		i := bytes.IndexByte(buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(bytes.TrimSuffix(buf.Next(i + 1)[:i], []byte("\r"))))
	}
	if buf.Len() == 0 {
		buf.Reset()
	}
	b.mu.Unlock()
	for _, l := range lines {
		b.add(level, source, l)
	}
}

// finish flushes unterminated output and returns the entries, with the
// truncation marker last if anything was dropped.
func (b *logBuffer) finish() []LogEntry {
	for fd := 1; fd <= 2; fd++ {
		b.mu.Lock()
		rest := b.partial[fd].String()
		b.partial[fd].Reset()
		b.mu.Unlock()
		if rest != "" {
			b.write(fd, []byte(rest+"\n"))
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.entries
	if b.dropped > 0 || b.droppedB > 0 {
		out = append(out, LogEntry{Level: LevelWarn, Source: SourceHost,
			Message: fmt.Sprintf("log truncated: %d more lines (%d bytes) dropped past the %d-byte limit", b.dropped, b.droppedB, b.budget)})
	}
	return out
}

// LogCollector is the log budget of a call, for runners that receive log
// lines from elsewhere (a worker process): lines past the budget are
// counted, and Finish adds the truncation marker.
type LogCollector struct{ b *logBuffer }

// NewLogCollector makes a collector with budget bytes (0: the default);
// redact rewrites each line first and notify sees each kept line.
func NewLogCollector(budget int, redact func(string) string, notify func(LogEntry)) *LogCollector {
	if budget <= 0 {
		budget = DefaultMaxLogBytes
	}
	return &LogCollector{b: newLogBuffer(budget, redact, notify)}
}

// Add records one line.
func (c *LogCollector) Add(level Level, source, msg string) { c.b.add(level, source, msg) }

// Finish returns the lines kept, with the truncation marker if any were
// dropped.
func (c *LogCollector) Finish() []LogEntry { return c.b.finish() }
