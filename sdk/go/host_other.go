//go:build !wasip1

package maiden

import (
	"fmt"
	"os"
	"sync"
)

// Host stands in for maiden's host interface when this package runs outside
// maiden: on the development machine, under `go test`. It exists only in
// builds for GOOS other than wasip1.
type Host interface {
	Log(level Level, msg string)
	Fetch(req Request) (Response, error)
}

var (
	hostMu  sync.Mutex
	current Host = defaultHost{}
)

// SetHost makes Log and Fetch use h and returns a function that restores the
// previous host. A nil h restores the default, which writes log lines to
// standard error and refuses every request. Only in builds for GOOS other
// than wasip1; it is meant for tests:
//
//	restore := maiden.SetHost(myFakeHost)
//	t.Cleanup(restore)
func SetHost(h Host) (restore func()) {
	if h == nil {
		h = defaultHost{}
	}
	hostMu.Lock()
	prev := current
	current = h
	hostMu.Unlock()
	return func() {
		hostMu.Lock()
		current = prev
		hostMu.Unlock()
	}
}

func host() Host {
	hostMu.Lock()
	defer hostMu.Unlock()
	return current
}

func hostLog(level Level, msg string)         { host().Log(level, msg) }
func hostFetch(req Request) (Response, error) { return host().Fetch(req) }
func registeredHook()                         {}

type defaultHost struct{}

func (defaultHost) Log(level Level, msg string) { fmt.Fprintf(os.Stderr, "[%s] %s\n", level, msg) }

func (defaultHost) Fetch(Request) (Response, error) {
	return Response{}, &FetchError{Kind: FetchDenied, Message: "no maiden host: Fetch works only under maiden (a test can install a stand-in with SetHost)"}
}
