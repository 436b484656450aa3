package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// DigestError is a component file refused because the bytes a runner read
// from it do not hash to the digest its caller pinned it to
// (Runner.OpenPinned): the file changed after it was verified (an oci://
// component's layer in the store, replaced after the store's Load hashed
// it). Nothing of it was compiled or run. It wraps ErrInvalidTool: the tool
// does not load.
type DigestError struct {
	Path string // the file read
	Want string // the pinned digest, "sha256:HEX"
	Got  string // the digest of the bytes read, "sha256:HEX"
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("%v: %s holds bytes hashing to %s, not %s as pinned: the file changed after it was verified, and nothing of it is compiled or run",
		ErrInvalidTool, e.Path, e.Got, e.Want)
}

func (e *DigestError) Unwrap() error { return ErrInvalidTool }

func isDigestError(err error) bool {
	var de *DigestError
	return errors.As(err, &de)
}

// checkDigest refuses the bytes read from path, whose SHA-256 is hex (as
// LoadInfo.Digest), unless want is "" or names that hash. Digests are not
// secret, but they are compared in constant time as everywhere else, and
// without allocating: this runs on every Open of a version loaded for
// another caller's pin.
func checkDigest(path, want, hex string) error {
	if want == "" {
		return nil
	}
	if w, ok := strings.CutPrefix(want, "sha256:"); ok && len(w) == len(hex) {
		var diff byte
		for i := 0; i < len(w); i++ {
			diff |= w[i] ^ hex[i]
		}
		if diff == 0 {
			return nil
		}
	}
	return &DigestError{Path: path, Want: want, Got: "sha256:" + hex}
}

// CheckDigest is checkDigest for runners of another package (package
// worker's registry): nil when want is "" or the SHA-256 hex of the bytes
// read from path is want's, else a *DigestError.
func CheckDigest(path, want, hex string) error { return checkDigest(path, want, hex) }
