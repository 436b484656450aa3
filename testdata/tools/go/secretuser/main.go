// Command secretuser is the test tool of secret handles (maiden:tool@0.3.0,
// since it calls maiden.Reveal). It logs and returns the token it received
// (a handle, when the caller wrote {"$secret": "NAME"}), then by mode:
//
//	"fetch"   GETs url with the token as http-fetch's credential and returns
//	          the status and body
//	"reveal"  asks the host to reveal the token and echoes the answer into
//	          its log, its stdout and its output (the hostile part: a
//	          revealed value must come back redacted)
//	"revealfetch" reveals the token, then GETs url + "/" + the value with the
//	          value as http-fetch's credential (a key that belongs in the path,
//	          as some APIs want; the hostile part: the host's records of the
//	          request must not keep the value), and fails once the second
//	          request is refused
//	""        nothing more
//
// count is there so that a schema place wants a number.
package main

import (
	"context"
	"errors"
	"fmt"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type input struct {
	Token string `json:"token" jsonschema:"a secret handle ({\"$secret\": \"NAME\"}) or any text"`
	Mode  string `json:"mode,omitempty" jsonschema:"fetch, reveal or nothing"`
	URL   string `json:"url,omitempty" jsonschema:"what fetch GETs"`
	Count int    `json:"count,omitempty" jsonschema:"any number"`
}

type output struct {
	Received string `json:"received"`
	Status   int    `json:"status,omitempty"`
	Body     string `json:"body,omitempty"`
	Revealed string `json:"revealed,omitempty"`
	Error    string `json:"error,omitempty"`
}

func main() {}

func init() {
	maiden.Register(maiden.Func("Uses a secret handle: passes it to http-fetch or reveals it.", func(ctx context.Context, in input) (output, error) {
		out := output{Received: in.Token}
		maiden.Log(maiden.LevelInfo, "received "+in.Token)
		switch in.Mode {
		case "fetch":
			resp, err := maiden.Fetch(maiden.Request{URL: in.URL, Credential: in.Token})
			if err != nil {
				out.Error = err.Error()
				return out, nil
			}
			out.Status, out.Body = resp.Status, string(resp.Body)
		case "reveal":
			v, err := maiden.Reveal(in.Token)
			if err != nil {
				out.Error = err.Error()
				return out, nil
			}
			maiden.Log(maiden.LevelInfo, "revealed "+v)
			fmt.Println("stdout " + v)
			out.Revealed = v
		case "revealfetch":
			v, err := maiden.Reveal(in.Token)
			if err != nil {
				out.Error = err.Error()
				return out, nil
			}
			resp, err := maiden.Fetch(maiden.Request{URL: in.URL + "/" + v})
			if err == nil {
				out.Status = resp.Status
			}
			if _, err := maiden.Fetch(maiden.Request{URL: in.URL, Credential: v}); err != nil {
				return out, errors.New("gave up")
			}
		}
		return out, nil
	}))
}
