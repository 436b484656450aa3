//go:build wasip1 && (!maiden_tool_0_3 || maiden_tool_0_1 || maiden_middleware)

package maiden

// hostReveal of a component built against maiden:tool@0.2.0 or 0.1.0 (or
// a middleware): the host interface it imports has no reveal.
func hostReveal(string) (string, error) { return "", ErrNoReveal }
