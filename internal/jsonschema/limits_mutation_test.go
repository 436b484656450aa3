package jsonschema

import (
	"strings"
	"testing"
)

// TestInputDepthLimitIsExact: an input nested 64 deep is checked, one
// nested 65 deep is refused before the library sees it, for objects and
// arrays alike (the top-level object is depth 1).
func TestInputDepthLimitIsExact(t *testing.T) {
	s := mustCompile(t, `{"type":"object"}`)
	objects := func(d int) string { return strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d) }
	arrays := func(d int) string { return `{"a":` + strings.Repeat("[", d-1) + "1" + strings.Repeat("]", d-1) + "}" }
	for name, nest := range map[string]func(int) string{"objects": objects, "arrays": arrays} {
		if err := s.validate(mustParse(t, nest(64))); err != nil {
			t.Errorf("%s nested 64 deep: %v; want it to fit", name, err)
		}
		if err := s.validate(mustParse(t, nest(65))); err == nil || !strings.Contains(err.Error(), "nested more than 64 deep") {
			t.Errorf("%s nested 65 deep: %v; want it refused as nested more than 64 deep", name, err)
		}
	}
}
