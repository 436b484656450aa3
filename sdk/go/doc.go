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
// 0.1.0 instead, for a host that predates 0.2.0.
//
// # Errors and panics
//
// An error returned by Execute becomes the call's tool error (kind "tool"),
// which the agent sees. A panic ends the instance: the call fails with kind
// "trap" and the panic's message and stack are in the call's log.
//
// # Outside maiden
//
// On any other GOOS/GOARCH the package compiles with a stand-in host, so
// `go vet` and `go test` of a tool work on the development machine: Log
// writes to standard error, Fetch refuses every request unless a test
// installs its own host with SetHost.
package maiden
