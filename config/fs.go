package config

// A WebAssembly tool's filesystem policy: the fs key of [tools.NAME].
// Absent, the tool gets no filesystem at all. "read" lets it read beneath
// the subtree entries of the calling session's boundary; "write" lets it
// also write beneath the entries the boundary grants write. The root turns
// the policy and the boundary into the call's WASI preopened directories
// (preopens.go); the key grants nothing by itself.
const (
	FSNone  = ""
	FSRead  = "read"
	FSWrite = "write"
)

// fsAccess checks a tool's fs key.
func (c *checker) fsAccess(n *tnode, key string) string {
	s, line, ok := c.str(n, key)
	if !ok {
		return FSNone
	}
	switch s {
	case FSRead, FSWrite:
		return s
	}
	c.errorf(line, key, "unknown filesystem access %s; valid values: %q (read beneath the session boundary's directories), %q (also write where the boundary allows it); leave fs out for no filesystem", quoteShort(s), FSRead, FSWrite)
	return FSNone
}
