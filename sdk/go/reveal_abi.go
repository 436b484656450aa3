package maiden

import "fmt"

// liftStringResult decodes a result<string, string> return area at ret
// (12 bytes: tag u8 @0, ptr @4, len @8; see abi.go), copying the string
// out of m. ok is the tag; a tag that is neither 0 nor 1 is reported as
// an error text rather than trusted.
func liftStringResult(m memory, ret uint32) (ok bool, text string) {
	area := m.bytes(ret, resultAreaSize)
	switch area[0] {
	case 0:
		return true, loadString(m, ret+4)
	case 1:
		return false, loadString(m, ret+4)
	}
	return false, fmt.Sprintf("malformed result from the host (tag %d)", area[0])
}
