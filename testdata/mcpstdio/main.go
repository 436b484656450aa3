// Command mcpstdio is a small MCP server over stdio for maiden's tests of
// MCP imports ([mcp.NAME] command = [...]): "add" adds two integers, "read"
// returns a file's contents (to show the confinement of stdio servers:
// a file outside the import's read_paths cannot be read). Build it with
// `go build ./testdata/mcpstdio` (the tests do).
package main

import (
	"context"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

type readIn struct {
	Path string `json:"path"`
}

type readOut struct {
	Text string `json:"text"`
}

func main() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpstdio", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "adds two integers"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Description: "reads a file"},
		func(ctx context.Context, req *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, readOut, error) {
			b, err := os.ReadFile(in.Path)
			if err != nil {
				return nil, readOut{}, err
			}
			return nil, readOut{Text: string(b)}, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
