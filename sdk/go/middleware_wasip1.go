//go:build wasip1 && maiden_middleware

//lint:file-ignore U1000 staticcheck does not see //go:wasmexport functions (and what only they use) as used

package maiden

// A middleware build (-tags maiden_middleware, which maiden build sets for a
// package that calls Middleware): the component speaks
// maiden:middleware@0.1.0. It imports only the log and exports describe and
// handle; Fetch is refused without reaching the host, which gives a
// middleware no network.

//go:wasmimport maiden:middleware/host@0.1.0 log
func logImport(level, msgPtr, msgLen uint32)

func hostFetch(Request) (Response, error) {
	return Response{}, &FetchError{Kind: FetchDenied, Message: "a middleware has no network"}
}

//go:wasmexport describe
func describe() uint32 {
	if registeredMW.fn == nil {
		panic(errNoMiddleware)
	}
	return returnString(validUTF8(registeredMW.desc))
}

//go:wasmexport handle
func handle(ptr, n uint32) uint32 {
	// The host placed the event with cabi_realloc; copy it out.
	event := append([]byte(nil), linearMemory{}.bytes(ptr, n)...)
	releaseScratch()
	gcOn()
	text, isErr := handleResult(event)
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

//go:wasmexport cabi_post_handle
func postHandle(uint32) {
	retText = ""
	releaseScratch()
}
