package sandbox

import (
	"context"
	"errors"
	"sync"
)

// InfoCache remembers what each component version says about itself
// (describe and schema), by digest. A failure the tool caused (a trap, a
// start-up loop that ran out its own deadline) is remembered like a success:
// asking again would run the same code to the same end. A failure the
// caller caused (its context cancelled, or a host error) is not, so one
// impatient caller under load cannot mark a good tool broken until its file
// changes.
type InfoCache struct {
	mu sync.Mutex
	m  map[string]*infoEntry
}

type infoEntry struct {
	ready chan struct{}
	info  Info
	err   error
}

// maxInfos bounds the cache; it starts over when full (one entry per
// version of a file, so only months of hot reloads reach it).
const maxInfos = 4096

func (c *InfoCache) Get(ctx context.Context, digest string, load func() (Info, error)) (Info, error) {
	for {
		c.mu.Lock()
		if c.m == nil || len(c.m) >= maxInfos {
			c.m = map[string]*infoEntry{}
		}
		e, ok := c.m[digest]
		if !ok {
			e = &infoEntry{ready: make(chan struct{})}
			c.m[digest] = e
			c.mu.Unlock()
			e.info, e.err = load()
			if e.err != nil && !remembered(e.err) {
				c.mu.Lock()
				if c.m[digest] == e {
					delete(c.m, digest)
				}
				c.mu.Unlock()
			}
			close(e.ready)
			return e.info, e.err
		}
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return Info{}, ctx.Err()
		}
		if e.err != nil && !remembered(e.err) {
			// The caller who loaded it gave up; try under this caller's
			// context.
			continue
		}
		return e.info, e.err
	}
}

// remembered tells whether a describe failure belongs to the component
// version (so it is cached) rather than to the call that asked.
func remembered(err error) bool {
	return errors.Is(err, ErrInvalidTool)
}
