//go:build !wasip1

package maiden

import "errors"

// Revealer is what a stand-in Host (see SetHost) implements to serve Reveal
// in tests outside maiden. A Host without it refuses every handle.
type Revealer interface {
	Reveal(handle string) (string, error)
}

func hostReveal(handle string) (string, error) {
	if r, ok := host().(Revealer); ok {
		return r.Reveal(handle)
	}
	return "", &RevealError{Message: errors.New("no maiden host: Reveal works only under maiden (a test can install a stand-in Host that implements Revealer with SetHost)").Error()}
}
