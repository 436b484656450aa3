package jsonschema

import "sync"

// Cache holds compiled schemas by component digest: a tool's schema() is
// asked once per version of its file, so it is compiled once too. T is
// what the caller keeps per schema (a *Schema, or its own value around
// one). The zero Cache is ready to use.
type Cache[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

const maxCachedSchemas = 1024

// Peek is the schema compiled for digest, if there is one.
func (c *Cache[T]) Peek(digest string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[digest]
	return s, ok
}

// Get is the schema compiled for digest, compiling text with compile the
// first time.
func (c *Cache[T]) Get(digest, text string, compile func(string) T) T {
	c.mu.Lock()
	s, ok := c.m[digest]
	c.mu.Unlock()
	if ok {
		return s
	}
	// Outside the lock: a schema at the limits takes ~0.2 s to check and
	// compile, and calls to other tools should not wait for it. Two calls
	// may compile the same schema at once; the first stored wins.
	s = compile(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[digest]; ok {
		return prev
	}
	if c.m == nil || len(c.m) >= maxCachedSchemas {
		c.m = map[string]T{} // hot reloads over months; start over
	}
	c.m[digest] = s
	return s
}
