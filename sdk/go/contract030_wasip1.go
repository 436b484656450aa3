//go:build wasip1 && maiden_tool_0_3 && !maiden_tool_0_1 && !maiden_middleware

//lint:file-ignore U1000 staticcheck does not see //go:wasmexport functions as used

package maiden

// This file makes the tool speak maiden:tool@0.3.0: 0.2.0 (string bodies,
// the output-schema export) plus the host's reveal. maiden build selects it
// (-tags maiden_tool_0_3) for a package that calls Reveal; a tool that does
// not reveal stays on 0.2.0 and so also runs on hosts that predate 0.3.0.

// stringBodies tells hostFetch to encode and decode bodies as strings.
const stringBodies = true

//go:wasmimport maiden:tool/host@0.3.0 log
func logImport(level, msgPtr, msgLen uint32)

//go:wasmimport maiden:tool/host@0.3.0 http-fetch
func fetchImport(methodPtr, methodLen, urlPtr, urlLen, headersPtr, headersLen, bodyPtr, bodyLen, credTag, credPtr, credLen, ret uint32)

//go:wasmimport maiden:tool/host@0.3.0 reveal
func revealImport(handlePtr, handleLen, ret uint32)

//go:wasmexport output-schema
func outputSchemaExport() uint32 { return returnString(validUTF8(outputSchemaOf(mustTool()))) }

//go:wasmexport cabi_post_output-schema
func postOutputSchema(uint32) { retText = "" }
