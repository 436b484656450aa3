// Package capread bounds what a body may yield: reading past its limit
// fails, so a sender that declares less than it sends, or nothing, cannot
// be read on without end. Used for the answers of registries
// (internal/oci) and of MCP upstreams over HTTP (internal/mcpimport).
package capread

import "io"

// Body is rc read up to a limit: the read that would pass it fails with
// the error given, the bytes past it unseen by the caller.
type Body struct {
	rc       io.ReadCloser
	left     int64
	tooLarge error
}

// New bounds rc to max bytes; a read past them returns tooLarge.
func New(rc io.ReadCloser, max int64, tooLarge error) *Body {
	return &Body{rc: rc, left: max, tooLarge: tooLarge}
}

// Read reads at most one byte past the limit, to tell a body of exactly
// the limit from a longer one, and fails if it got it.
func (b *Body) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, b.tooLarge
		}
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, b.tooLarge
	}
	return n, err
}

// Close closes the body.
func (b *Body) Close() error { return b.rc.Close() }
