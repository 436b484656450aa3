// Command sdktool exercises the SDK under maiden: each input's "op" picks a
// behaviour that sdk_test.go checks through the real sandbox.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// initialised is set by an init function: execute seeing it proves that
// _initialize ran before the first export.
var initialised string

// fromVar is set by a package-level initializer.
var fromVar = strings.Repeat("v", 3)

func init() {
	initialised = "init ran"
	maiden.Register(tool{})
}

func main() {}

type input struct {
	Op         string            `json:"op"`
	Msg        string            `json:"msg,omitempty"`
	URL        string            `json:"url,omitempty"`
	Method     string            `json:"method,omitempty"`
	Credential string            `json:"credential,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       string            `json:"body,omitempty"`
	BodyB64    string            `json:"body_b64,omitempty"`
	MB         int               `json:"mb,omitempty"`
	N          int               `json:"n,omitempty"`
	Pad        string            `json:"pad,omitempty"`
}

type tool struct{}

func (tool) Describe() string { return "Exercises the maiden Go SDK." }

func (tool) Schema() string { return maiden.SchemaFor[input]() }

func (tool) Execute(ctx context.Context, raw []byte) ([]byte, error) {
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("bad input: %w", err)
	}
	switch in.Op {
	case "echo":
		return []byte(in.Msg), nil
	case "len":
		return []byte(fmt.Sprint(len(raw))), nil
	case "init":
		return []byte(initialised + " " + fromVar), nil
	case "log":
		maiden.Log(maiden.LevelDebug, "debug line")
		maiden.Log(maiden.LevelInfo, "info line")
		maiden.Logf(maiden.LevelWarn, "warn %d", 3)
		maiden.Log(maiden.LevelError, "error line")
		fmt.Println("stdout line")
		fmt.Fprintln(os.Stderr, "stderr line")
		return []byte("logged"), nil
	case "error":
		return nil, errors.New("the tool refused: " + in.Msg)
	case "panic":
		panic("boom: " + in.Msg)
	case "badutf8":
		return []byte{0xff, 0xfe}, nil
	case "alloc":
		return []byte(fmt.Sprint(churn(in.MB))), nil
	case "fetchsum":
		// Binary bodies both ways: the request body arrives base64 in the
		// input, the response body is summarised by its length and SHA-256.
		body, err := base64.StdEncoding.DecodeString(in.BodyB64)
		if err != nil {
			return nil, fmt.Errorf("body_b64: %w", err)
		}
		resp, err := maiden.Fetch(maiden.Request{Method: in.Method, URL: in.URL, Body: body})
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(resp.Body)
		return []byte(fmt.Sprintf("%d|%d|%x", resp.Status, len(resp.Body), sum)), nil
	case "fetchlen":
		// Only the status and length: what a benchmark of receiving a body
		// needs, with no per-byte work in the tool.
		resp, err := maiden.Fetch(maiden.Request{URL: in.URL})
		if err != nil {
			return nil, err
		}
		return []byte(fmt.Sprintf("%d|%d", resp.Status, len(resp.Body))), nil
	case "fetch":
		req := maiden.Request{Method: in.Method, URL: in.URL, Credential: in.Credential, Body: []byte(in.Body)}
		for k, v := range in.Headers {
			req.Header = append(req.Header, maiden.Header{Name: k, Value: v})
		}
		var out []string
		for range max(in.N, 1) {
			churn(in.MB)
			resp, err := maiden.Fetch(req)
			var fe *maiden.FetchError
			switch {
			case errors.As(err, &fe):
				return nil, fmt.Errorf("%s|%s|denied=%v", fe.Kind, fe.Message, errors.Is(err, maiden.ErrDenied))
			case err != nil:
				return nil, err
			}
			var hs []string
			for _, h := range resp.Header {
				hs = append(hs, h.Name+"="+h.Value)
			}
			out = append(out, fmt.Sprintf("%d|%s|%d|%s", resp.Status, strings.Join(hs, ","), len(resp.Body), head(resp.Body)))
		}
		return []byte(strings.Join(out, "\n")), nil
	}
	return nil, fmt.Errorf("unknown op %q", in.Op)
}

// churn allocates and drops mb MiB in 64 KiB pieces: only a working
// collector keeps this under the memory ceiling. It returns how many pieces
// were live at the end.
func churn(mb int) int {
	var keep [][]byte
	for i := 0; i < mb*16; i++ {
		keep = append(keep, make([]byte, 64<<10))
		if len(keep) > 16 {
			keep = keep[1:]
		}
	}
	return len(keep)
}

func head(b []byte) string {
	if len(b) > 32 {
		b = b[:32]
	}
	return string(b)
}
