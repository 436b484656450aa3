//go:build wasip1 && !maiden_middleware

//lint:file-ignore U1000 staticcheck does not see //go:wasmexport functions (and what only they use) as used

package maiden

// The exports of world tool (maiden:tool) and http-fetch. A middleware
// build (-tags maiden_middleware) has middleware_wasip1.go instead.

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"unicode/utf8"
)

//go:wasmexport describe
func describe() uint32 { return returnString(validUTF8(mustTool().Describe())) }

//go:wasmexport schema
func schema() uint32 { return returnString(validUTF8(mustTool().Schema())) }

//go:wasmexport execute
func execute(ptr, n uint32) uint32 {
	// The host placed the input with cabi_realloc; copy it out so the
	// arena can serve http-fetch results.
	input := append([]byte(nil), linearMemory{}.bytes(ptr, n)...)
	releaseScratch()
	gcOn()
	text, isErr := executeResult(input)
	gcOff()
	retText = text
	retArea[0] = 0
	if isErr {
		retArea[0] = 1
	}
	retArea[1], retArea[2] = addrOfString(text), uint32(len(text))
	return addrOfArea(&retArea)
}

//go:wasmexport cabi_post_describe
func postDescribe(uint32) { retText = "" }

//go:wasmexport cabi_post_schema
func postSchema(uint32) { retText = "" }

//go:wasmexport cabi_post_execute
func postExecute(uint32) {
	retText = ""
	releaseScratch()
}

var (
	fetchMu  sync.Mutex // one request at a time: they share the arena and fetchRet
	fetchRet [6]uint32  // http-fetch's 24-byte return area
)

func hostFetch(req Request) (Response, error) {
	fetchMu.Lock()
	defer fetchMu.Unlock()
	if stringBodies {
		// 0.2.0 carries the body as a string, one character per byte.
		req.Body = encodeBody(req.Body)
	}
	p, table := lowerRequest(req, addrOfBytes, addrOfString)
	// The host calls cabi_realloc for the response while the import runs.
	prev := debug.SetGCPercent(-1)
	releaseScratch()
	fetchImport(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], addrOfFetch(&fetchRet))
	resp, err := liftFetchResult(linearMemory{}, addrOfFetch(&fetchRet), stringBodies)
	releaseScratch()
	debug.SetGCPercent(prev)
	runtime.KeepAlive(req)
	runtime.KeepAlive(table)
	return resp, err
}

// errNoTool is the panic of an export called when no tool was registered.
const errNoTool = "maiden: no tool registered: call maiden.Register(yourTool) from an init function in package main"

func mustTool() Tool {
	if registered == nil {
		panic(errNoTool)
	}
	return registered
}

// executeResult runs the registered tool on input and returns the text and
// whether it is an error, as the execute export returns them. Output that is
// not UTF-8 becomes an error: the host would trap on it.
func executeResult(input []byte) (text string, isErr bool) {
	out, err := mustTool().Execute(context.Background(), input)
	if err != nil {
		return validUTF8(err.Error()), true
	}
	if !utf8.Valid(out) {
		return "maiden: the tool's output is not valid UTF-8 (Execute must return text, usually JSON)", true
	}
	return string(out), false
}
