//go:build wasip1 && !maiden_tool_0_1 && !maiden_tool_0_3 && !maiden_middleware

//lint:file-ignore U1000 staticcheck does not see //go:wasmexport functions as used

package maiden

// This file makes the tool speak maiden:tool@0.2.0, the default: bodies
// cross http-fetch as strings (one character per byte, see encodeBody), which
// wasmtime moves as one buffer, and the world exports output-schema.

// stringBodies tells hostFetch to encode and decode bodies as 0.2.0 strings.
const stringBodies = true

//go:wasmimport maiden:tool/host@0.2.0 log
func logImport(level, msgPtr, msgLen uint32)

//go:wasmimport maiden:tool/host@0.2.0 http-fetch
func fetchImport(methodPtr, methodLen, urlPtr, urlLen, headersPtr, headersLen, bodyPtr, bodyLen, credTag, credPtr, credLen, ret uint32)

//go:wasmexport output-schema
func outputSchemaExport() uint32 { return returnString(validUTF8(outputSchemaOf(mustTool()))) }

//go:wasmexport cabi_post_output-schema
func postOutputSchema(uint32) { retText = "" }
