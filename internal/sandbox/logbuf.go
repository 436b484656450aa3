package sandbox

import (
	"bytes"
	"fmt"
	"sync"
	"unicode/utf8"
)

// Level is the severity of a tool's log line, as in the WIT enum.
type Level string

// Levels, in the contract's order.
const (
	LevelDebug Level = "debug"
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"
	LevelError Level = "error"
)

// Log sources: what produced a line.
const (
	SourceLog    = "log"    // the host interface's log function
	SourceStdout = "stdout" // WASI standard output, one entry per line
	SourceStderr = "stderr" // WASI standard error, one entry per line
	SourceHost   = "host"   // maiden itself (e.g. the truncation marker)
)

// LogEntry is one line of a call's log.
type LogEntry struct {
	Level   Level  `json:"level"`
	Source  string `json:"source"`
	Message string `json:"message"`
}

// logBuffer collects a call's log within a byte budget. Lines past the
// budget are counted, not kept, and one marker says how much was dropped:
// a tool cannot make the host hold more than the budget, and the reader
// still learns that something was lost.
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

func (b *logBuffer) add(level Level, source, msg string) {
	if !utf8.ValidString(msg) {
		msg = string(bytes.ToValidUTF8([]byte(msg), []byte("\uFFFD")))
	}
	if b.redact != nil {
		msg = b.redact(msg)
	}
	b.mu.Lock()
	if b.dropped > 0 || b.used+len(msg) > b.budget {
		b.dropped++
		b.droppedB += len(msg)
		b.mu.Unlock()
		return
	}
	e := LogEntry{Level: level, Source: source, Message: msg}
	b.used += len(msg)
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
