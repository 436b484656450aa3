// Package wit holds maiden's tool contract, the WIT package maiden:tool, in
// every version the host links: 0.3.0 (0.2.0 plus reveal), 0.2.0 (current:
// what a tool that does not reveal is built against) and 0.1.0; and the
// contract of operator middleware components, maiden:middleware@0.1.0.
//
// The .wit files beside this one are public API: tools are built against them
// and the host links exactly the interfaces they describe. The Go package
// exists so that the contract can be embedded where it is needed (the tool
// templates vendor it, the build step embeds it into components) without a
// second copy.
package wit

import _ "embed"

// Contract is one version of maiden:tool.
type Contract struct {
	// Version is the package's semantic version, e.g. "0.2.0".
	Version string
	// Package is the WIT package name and version tools import.
	Package string
	// HostInterface is the fully qualified name of the host interface as it
	// appears in a component's imports.
	HostInterface string
	// Text is the WIT document.
	Text string
	// StringBodies tells whether http-fetch's bodies are strings carrying
	// bytes (latin-1 in UTF-8, one character per byte) rather than list<u8>.
	StringBodies bool
	// OutputSchema tells whether world tool exports output-schema.
	OutputSchema bool
	// Reveal tells whether the host interface has reveal (0.3.0 and later).
	Reveal bool
}

var (
	//go:embed maiden-tool-0.3.0.wit
	text030 string
	//go:embed maiden-tool.wit
	text020 string
	//go:embed maiden-tool-0.1.0.wit
	text010 string
)

// V030, V020 and V010 are the versions of the contract. V020 moved bodies to
// strings because a string crosses wasmtime's component value API as one
// buffer, while a list<u8> costs a 32-byte value per byte. V030 adds reveal
// (a secret handle's value, for a tool that cannot pass the handle as
// http-fetch's credential); a tool that does not call it is built against
// V020, so it runs on hosts that predate V030 too.
var (
	V030 = Contract{
		Version: "0.3.0", Package: "maiden:tool@0.3.0", HostInterface: "maiden:tool/host@0.3.0",
		Text: text030, StringBodies: true, OutputSchema: true, Reveal: true,
	}
	V020 = Contract{
		Version: "0.2.0", Package: "maiden:tool@0.2.0", HostInterface: "maiden:tool/host@0.2.0",
		Text: text020, StringBodies: true, OutputSchema: true,
	}
	V010 = Contract{
		Version: "0.1.0", Package: "maiden:tool@0.1.0", HostInterface: "maiden:tool/host@0.1.0",
		Text: text010,
	}
)

// Contracts lists every version the host links, newest first.
var Contracts = []Contract{V030, V020, V010}

// Tool is the text of the current contract, maiden-tool.wit.
var Tool = text020

// Package is the current WIT package name and version new tools import.
const Package = "maiden:tool@0.2.0"

// World is the name of the world a tool component targets, in every version.
const World = "tool"

// HostInterface is the current host interface as it appears in a
// component's imports.
const HostInterface = "maiden:tool/host@0.2.0"

// RevealImport is the host function 0.3.0 added: a component that imports
// it was built against 0.3.0.
const RevealImport = "reveal"

// OutputSchemaExport is the export 0.2.0 added; a component with it was built
// against 0.2.0 or later.
const OutputSchemaExport = "output-schema"

//go:embed maiden-middleware.wit
var middlewareText string

// Middleware is the contract of operator middleware components
// (maiden-middleware.wit): they import only a log and export describe and
// handle. Package, HostInterface and Text have the meanings they have for
// the tool contract; the rest of Contract does not apply.
var Middleware = Contract{
	Version: "0.1.0", Package: "maiden:middleware@0.1.0", HostInterface: "maiden:middleware/host@0.1.0",
	Text: middlewareText,
}

// MiddlewareWorld is the name of the world a middleware component targets.
const MiddlewareWorld = "middleware"

// HandleExport is the export that runs one middleware hook; a component
// that has it (and no execute) is a middleware component.
const HandleExport = "handle"

// ExecuteExport is the tool's export that runs a call.
const ExecuteExport = "execute"

// EventVersion is the version of the event JSON that maiden:middleware@0.1.0
// components receive (the event's "version" field).
const EventVersion = 1
