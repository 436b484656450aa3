package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FuzzStdioInput: whatever bytes a client sends, the transport does not
// panic, keeps at most the line limit of any line, delivers only decoded
// messages, and every reply it writes itself is one well-formed JSON-RPC
// error response per line.
func FuzzStdioInput(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n",
		"garbage\n\n{}\n[]\nnull\n",
		`{"method":"x","params":{"a":"` + strings.Repeat("z", 3000) + `"},"jsonrpc":"2.0","id":"q"}` + "\n",
		`{"jsonrpc":"2.0","id":` + strings.Repeat("9", 3000) + "}\n",
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}` + "\n",
		"\xff\xfe\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var out testkit.SyncBuffer
		c := &stdioConn{
			w: &out, maxLine: func() int64 { return 2000 }, log: slog.New(slog.DiscardHandler),
			incoming: make(chan jsonrpc.Message), readErr: make(chan error, 1), closed: make(chan struct{}),
		}
		go c.readLoop(bufioReader(bytes.NewReader(data)))
		timeout := time.After(20 * time.Second)
		for done := false; !done; {
			select {
			case <-timeout:
				t.Fatalf("the transport did not finish reading %q in 20s", data)
			case m := <-c.incoming:
				// Answer calls, as the SDK would, so the EOF drain ends.
				if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
					resp := &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{}`)}
					if err := c.Write(t.Context(), resp); err != nil {
						t.Fatal(err)
					}
				}
			case err := <-c.readErr:
				if err != io.EOF {
					t.Fatalf("read error %v", err)
				}
				done = true
			}
		}
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if line == "" {
				continue
			}
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *jsonrpc.Error  `json:"error"`
				Result  json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil || m.JSONRPC != "2.0" || (m.Error == nil) == (m.Result == nil) {
				t.Fatalf("malformed reply line %q (%v)", line, err)
			}
			if m.Error != nil && m.Error.Code == 0 {
				t.Fatalf("reply with code 0: %q", line)
			}
		}
	})
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 64) }
