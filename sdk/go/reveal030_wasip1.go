//go:build wasip1 && maiden_tool_0_3 && !maiden_tool_0_1 && !maiden_middleware

package maiden

import (
	"runtime"
	"runtime/debug"
)

// revealRet is reveal's 12-byte return area: result<string, string>.
var revealRet [3]uint32

// hostReveal calls maiden:tool/host@0.3.0's reveal. The host places the
// answer with cabi_realloc while the import runs, so the collector is off
// and the arena is shared with Fetch (one host call at a time).
func hostReveal(handle string) (string, error) {
	fetchMu.Lock()
	defer fetchMu.Unlock()
	prev := debug.SetGCPercent(-1)
	releaseScratch()
	var p uint32
	if handle != "" {
		p = addrOfString(handle)
	}
	revealImport(p, uint32(len(handle)), addrOfArea(&revealRet))
	ok, text := liftStringResult(linearMemory{}, addrOfArea(&revealRet))
	releaseScratch()
	debug.SetGCPercent(prev)
	runtime.KeepAlive(handle)
	if !ok {
		return "", &RevealError{Message: text}
	}
	return text, nil
}
