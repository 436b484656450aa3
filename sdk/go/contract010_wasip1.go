//go:build wasip1 && maiden_tool_0_1 && !maiden_middleware

package maiden

// This file makes the tool speak maiden:tool@0.1.0 instead of 0.2.0, for a
// host that predates 0.2.0 and for benchmarks that compare the two: build
// with -tags maiden_tool_0_1 (e.g. GOFLAGS=-tags=maiden_tool_0_1 maiden
// build). Bodies are list<u8> and there is no output-schema export.

// stringBodies is false: bodies cross as list<u8>.
const stringBodies = false

//go:wasmimport maiden:tool/host@0.1.0 log
func logImport(level, msgPtr, msgLen uint32)

//go:wasmimport maiden:tool/host@0.1.0 http-fetch
func fetchImport(methodPtr, methodLen, urlPtr, urlLen, headersPtr, headersLen, bodyPtr, bodyLen, credTag, credPtr, credLen, ret uint32)
