package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's stdio transport (mcp.IOTransport, v1.8.0) ends the session at
// the first line it cannot decode: its read loop stops on any JSON or
// JSON-RPC decoding error, and the error closes the connection. One stray
// line from a client (or a byte of garbage) would end `maiden serve`. It also
// buffers a line up to 16 MiB whatever the input cap. stdioTransport replaces
// it: lines are read with a bounded buffer, and a line that is not a JSON-RPC
// message gets an error reply (id null unless its id can be read) and is
// skipped, as JSON-RPC 2.0 prescribes.

// EnvelopeAllowance is how much a message may exceed max_input_bytes on the
// wire: the JSON-RPC envelope and _meta around a tools/call's arguments.
// Arguments up to the cap itself reach the tools/call handler, which
// refuses them as kind input when they are over it.
const EnvelopeAllowance = 64 << 10

// readChunk is the stdio read buffer: lines are assembled from chunks this
// size, so an oversized line costs at most its limit in memory, never its
// length.
const readChunk = 64 << 10

// stdioTransport is an mcp.Transport over newline-delimited JSON-RPC on two
// streams, which survives malformed input.
type stdioTransport struct {
	r       io.Reader
	w       io.Writer
	maxLine func() int64 // read per line, so a reload's max_input_bytes applies
	// drainFor bounds the wait for answers after the client's EOF (see
	// drain); nil means a minute.
	drainFor func() time.Duration
	log      *slog.Logger
}

func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &stdioConn{
		w:        t.w,
		maxLine:  t.maxLine,
		drainFor: t.drainFor,
		log:      t.log,
		incoming: make(chan jsonrpc.Message),
		readErr:  make(chan error, 1),
		closed:   make(chan struct{}),
	}
	// Reads happen on their own goroutine so that Close can unblock Read
	// (the mcp.Connection contract); a read of stdin itself cannot be
	// interrupted, so that goroutine ends with the stream.
	go c.readLoop(bufio.NewReaderSize(t.r, readChunk))
	return c, nil
}

type stdioConn struct {
	w        io.Writer
	wmu      sync.Mutex // one message per write, whole
	maxLine  func() int64
	drainFor func() time.Duration
	log      *slog.Logger
	calls    inflight

	incoming  chan jsonrpc.Message
	readErr   chan error
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *stdioConn) SessionID() string { return "" }

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		return m, nil
	case err := <-c.readErr:
		return nil, err
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		if c.calls.finish(callKey{id: resp.ID}) {
			c.log.Debug("dropped the response to a cancelled request", "id", resp.ID.Raw())
			return nil
		}
		msg = withErrorCode(resp)
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a JSON-RPC message: %w", err)
	}
	return c.writeLine(data)
}

func (c *stdioConn) writeLine(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(append(data, '\n'))
	return err
}

func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// readLoop reads lines until the stream ends, delivering messages and
// answering the lines that are not.
func (c *stdioConn) readLoop(br *bufio.Reader) {
	for {
		limit := c.maxLine()
		line, over, err := readLine(br, limit)
		if over > 0 {
			c.refuseLong(line, over, limit)
		} else if len(bytes.TrimSpace(line)) > 0 {
			if msg, ok := c.decode(line); ok {
				select {
				case c.incoming <- msg:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.EOF // RunStdio treats a plain EOF as the client leaving
				c.drain()
			}
			c.readErr <- err
			return
		}
	}
}

// drain waits until every request read has been answered: a client that
// closes its end after its last request (`... | maiden serve`) still gets
// the answers, where ending the session at once would drop them. Each call
// is bounded by its tool's timeout, and the wait by drainFor in case a
// request is never answered; Close and the server's context end it too.
func (c *stdioConn) drain() {
	limit := time.Minute
	if c.drainFor != nil {
		limit = c.drainFor()
	}
	give := time.NewTimer(limit)
	defer give.Stop()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for c.calls.len() > 0 {
		select {
		case <-c.closed:
			return
		case <-give.C:
			c.log.Warn("the client closed its input; stopped waiting for requests still unanswered", "requests", c.calls.len(), "waited", limit)
			return
		case <-t.C:
		}
	}
}

// decode turns one line into a message, or answers it with the JSON-RPC
// error it deserves and reports false.
func (c *stdioConn) decode(line []byte) (jsonrpc.Message, bool) {
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		c.reply(nil, jsonrpc.CodeParseError, "parse error: the line is not valid JSON")
		return nil, false
	}
	if line[0] == '[' {
		// MCP dropped JSON-RPC batches in 2025-06-18 and the SDK ends the
		// session on one for later versions; no maiden client sends them.
		c.reply(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported")
		return nil, false
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		c.reply(idOf(line), jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
		return nil, false
	}
	if req, ok := msg.(*jsonrpc.Request); ok {
		if req.IsCall() {
			c.calls.begin(callKey{id: req.ID})
		} else if id, ok := cancelledID(req); ok && !c.calls.cancel(callKey{id: id}) {
			// The SDK cancels asynchronously, so a cancellation of a request
			// not (or no longer) running could hit the next request that
			// reuses its id. The spec says to ignore it; so it is, here.
			return nil, false
		}
	}
	return msg, true
}

// refuseLong answers a line longer than the limit. Only its head and tail
// were kept, which is where a request's id usually is.
func (c *stdioConn) refuseLong(headTail []byte, n, limit int64) {
	c.log.Warn("refused an oversized message", "bytes", n, "limit", limit)
	c.reply(idOfTruncated(headTail), jsonrpc.CodeInvalidRequest, fmt.Sprintf(
		"invalid request: message of %d bytes refused: more than %d bytes (max_input_bytes %d + %d for the envelope); send smaller arguments or raise max_input_bytes in agent.toml",
		n, limit, limit-EnvelopeAllowance, EnvelopeAllowance))
}

// reply writes a JSON-RPC error response; id is raw JSON (nil: null).
func (c *stdioConn) reply(id json.RawMessage, code int64, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	if err == nil {
		err = c.writeLine(data)
	}
	if err != nil {
		c.log.Debug("could not answer a malformed message", "error", err)
	}
}

// headKeep and tailKeep are how much of an oversized line is kept to find
// its id.
const (
	headKeep = 4 << 10
	tailKeep = 512
)

// readLine reads one line (without its newline) of at most limit bytes.
// For a longer line it reads on to the newline without keeping it, and
// returns its first headKeep and last tailKeep bytes, joined by a newline,
// with its length as over.
func readLine(br *bufio.Reader, limit int64) (line []byte, over int64, err error) {
	var n int64
	var tail []byte
	for {
		chunk, rerr := br.ReadSlice('\n')
		if rerr == nil {
			chunk = chunk[:len(chunk)-1] // ReadSlice ends with the newline only then
		}
		n += int64(len(chunk))
		if over == 0 && n <= limit {
			line = append(line, chunk...)
		} else {
			if over == 0 {
				line = append(line, chunk[:min(len(chunk), max(0, headKeep-len(line)))]...)
				line = line[:min(len(line), headKeep)]
			}
			tail = keepTail(tail, chunk)
			over = n
		}
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		if over > 0 {
			return append(append(line, '\n'), tail...), over, rerr
		}
		return line, 0, rerr
	}
}

func keepTail(tail, chunk []byte) []byte {
	tail = append(tail, chunk...)
	if len(tail) > tailKeep {
		tail = append(tail[:0], tail[len(tail)-tailKeep:]...)
	}
	return tail
}

// idOf reads the id of a message that is JSON but not a valid JSON-RPC
// message, if it is one an error reply may carry (a string or a number).
func idOf(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	return validID(m.ID)
}

func validID(raw json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return raw
	}
	return nil
}

// tailIDRE finds an id written last in an object, as the TypeScript SDK
// writes requests ({"method":...,"params":...,"jsonrpc":"2.0","id":7}).
var tailIDRE = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]{1,20}|"(?:[^"\\]|\\.){0,200}")\s*}\s*$`)

// idOfTruncated finds the id of an oversized message from its head (the
// top-level keys before the first value too long to keep) or its tail. It
// is a best effort, so that the client's request fails at once instead of
// waiting for a reply that never comes; a wrong guess can only misdirect an
// error to the same client.
func idOfTruncated(headTail []byte) json.RawMessage {
	head, tail, _ := bytes.Cut(headTail, []byte("\n"))
	dec := json.NewDecoder(bytes.NewReader(head))
	dec.UseNumber()
	if tok, err := dec.Token(); err == nil && tok == json.Delim('{') {
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				break
			}
			var val json.RawMessage
			if err := dec.Decode(&val); err != nil {
				break
			}
			if key == "id" {
				return validID(val)
			}
		}
	}
	if m := tailIDRE.FindSubmatch(tail); m != nil {
		return validID(m[1])
	}
	return nil
}
