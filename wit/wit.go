// Package wit holds maiden's tool contract, the WIT package maiden:tool@0.1.0.
//
// The .wit file beside this one is public API: tools are built against it and
// the host links exactly the interface it describes. The Go package exists so
// that the contract can be embedded where it is needed (the tool templates
// vendor it, the build step embeds it into components) without a second copy.
package wit

import _ "embed"

// Tool is the text of maiden-tool.wit.
//
//go:embed maiden-tool.wit
var Tool string

// Package is the WIT package name and version tools import.
const Package = "maiden:tool@0.1.0"

// World is the name of the world a tool component targets.
const World = "tool"

// HostInterface is the fully qualified name of the host interface as it
// appears in a component's imports.
const HostInterface = "maiden:tool/host@0.1.0"
