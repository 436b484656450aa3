// Package maiden is the Go SDK for writing maiden tools: WebAssembly
// components that an AI agent calls through maiden, in a sandbox with no
// ambient authority.
//
// Import it as
//
//	import maiden "github.com/maiden-run/maiden/sdk/go"
//
// (the import path ends in "go", the package is named maiden).
//
// A tool implements [Tool] (or uses [Func]) and registers itself from an init
// function. The package main must still declare an empty main: a tool is
// built as a WASI reactor (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared), so
// the runtime and every init function run when the host instantiates the
// tool, and main is never called.
//
//	package main
//
//	import (
//		"context"
//
//		maiden "github.com/maiden-run/maiden/sdk/go"
//	)
//
//	type Input struct {
//		Name string `json:"name" jsonschema:"who to greet"`
//	}
//
//	type Output struct {
//		Greeting string `json:"greeting"`
//	}
//
//	func init() {
//		maiden.Register(maiden.Func("Greets someone by name.",
//			func(ctx context.Context, in Input) (Output, error) {
//				maiden.Log(maiden.LevelInfo, "greeting "+in.Name)
//				return Output{Greeting: "Hello, " + in.Name + "!"}, nil
//			}))
//	}
//
//	func main() {}
//
// `maiden build` compiles such a package and wraps it into a component;
// `maiden new go NAME` creates a project that does all of this.
//
// # What a tool may do
//
// [Log] appends a line to the call's log. [Fetch] asks the host for an HTTPS
// request; the host refuses anything its policy does not allow (the
// tool's http_allow list, https only, declared credential names) and returns
// a [*FetchError] whose Kind says why. A credential is named, never held: the
// host attaches the secret's value, which never enters the tool. Anything
// written to os.Stdout or os.Stderr also ends up in the call's log. There is
// no file system, environment, clock-based timeout or socket access beyond
// that.
//
// # Contract version
//
// A tool built with this package targets maiden:tool@0.2.0: request and
// response bodies cross the host boundary as strings with one character per
// byte, which the package encodes and decodes (Request.Body and
// Response.Body are plain bytes), and the component exports its output
// schema (see [OutputSchemer]; [Func] derives one from a struct Out). Build
// with -tags maiden_tool_0_1 (GOFLAGS=-tags=maiden_tool_0_1) to target
// 0.1.0 instead, for a host that predates 0.2.0. A tool that calls [Reveal]
// targets maiden:tool@0.3.0 (0.2.0 plus the host's reveal): maiden build
// sets -tags maiden_tool_0_3 when package main calls it.
//
// # Secret handles
//
// An agent may write {"$secret": "NAME"} in place of a string of the
// tool's input; the tool receives an opaque handle instead (see
// [IsHandle]), valid only during that call. Pass it as Request.Credential
// and the host attaches the secret without the tool ever holding it. Only
// a tool that needs the value itself calls [Reveal], which the operator
// must allow (agent.toml reveal, a secret:reveal card) and which is
// audited.
//
// # Input keys
//
// [Func], [Event.DecodeInput] and [Invocation.DecodeOptions] decode JSON as
// encoding/json does, except that an object key fills a struct field only
// when it is the field's JSON name exactly: a key that differs from it only
// in case ("CITY" for `json:"city"`) is an error, because maiden's schema
// checks, cards and middleware conditions read keys exactly. Keys that match
// no field are ignored, and a map field takes any key.
//
// # Errors and panics
//
// An error returned by Execute becomes the call's tool error (kind "tool"),
// which the agent sees. A panic ends the instance: the call fails with kind
// "trap" and the panic's message and stack are in the call's log.
//
// # Middleware
//
// A middleware is an operator's check that maiden runs around tool calls:
// before the tool runs it sees the call and may pass it, reject it with a
// message for the agent, or rewrite its input; after the tool succeeded it
// sees the output and the log lines and may pass, reject or rewrite it;
// after the tool ran and the call failed it sees the error and the log
// lines and may pass or reject (PhaseFailed). It has no network and no
// files: it decides from the event alone. It is a component of world
// middleware (maiden:middleware@0.1.0, wit/maiden-middleware.wit), which
// `maiden build` makes from a Go package main that calls Middleware from
// an init function (the build sets the tag maiden_middleware, which gives
// the component the middleware's exports instead of a tool's):
//
//	func init() {
//		maiden.Middleware("Refuses Atlantis.", func(ev maiden.Event) (maiden.Verdict, error) {
//			var in struct{ City string `json:"city"` }
//			if err := ev.DecodeInput(&in); err != nil {
//				return maiden.Verdict{}, err
//			}
//			if in.City == "Atlantis" {
//				return maiden.Reject("Atlantis is not on the map"), nil
//			}
//			return maiden.Pass(), nil
//		})
//	}
//
// A middleware's exports replace a tool's: one component is either. See
// [Event], [Verdict] and docs/middleware-components.md; `maiden new
// middleware-go NAME` creates a project.
//
// # Outside maiden
//
// On any other GOOS/GOARCH the package compiles with a stand-in host, so
// `go vet` and `go test` of a tool work on the development machine: Log
// writes to standard error, Fetch refuses every request unless a test
// installs its own host with SetHost.
package maiden
