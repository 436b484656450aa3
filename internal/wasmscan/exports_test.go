package wasmscan_test

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/wasmscan"
	"github.com/maiden-run/maiden/internal/wasmscan/scantest"
)

// TestExports reads the top-level export names of real components: a tool
// and middleware in each toolchain's shape (WAT, Go with the preview1
// adapter, JS from componentize-js).
func TestExports(t *testing.T) {
	for _, tc := range []struct {
		component string
		want      []string
	}{
		{testkit.Component(t, "echo"), []string{"describe", "execute", "schema"}},
		{testkit.Component(t, "go/echo"), []string{"describe", "execute", "output-schema", "schema"}},
		{testkit.Middleware(t, "pass"), []string{"describe", "handle"}},
		{testkit.Middleware(t, "city"), []string{"describe", "handle"}},
		{testkit.Middleware(t, "js/city"), []string{"describe", "handle"}},
	} {
		b, err := os.ReadFile(tc.component)
		if err != nil {
			t.Fatal(err)
		}
		got, err := wasmscan.Exports(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.component, err)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: exports %q, want %q", tc.component, got, tc.want)
		}
	}
	for _, bad := range [][]byte{nil, []byte("\x00asm\x01\x00\x00\x00"), append([]byte("\x00asm\x0d\x00\x01\x00"), 11, 5, 1, 0)} {
		if _, err := wasmscan.Exports(bad); !errors.Is(err, wasmscan.ErrMalformed) {
			t.Errorf("Exports(% x) = %v, want ErrMalformed", bad, err)
		}
	}
}

// FuzzExports: Exports survives any bytes and fails only with ErrMalformed.
func FuzzExports(f *testing.F) {
	f.Add(scantest.Component(scantest.Module(scantest.ModuleSpec{Functions: 1}), 1))
	for _, tc := range indexSpaceCases() {
		f.Add(tc)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := wasmscan.Exports(b)
		if err != nil && !errors.Is(err, wasmscan.ErrMalformed) {
			t.Fatalf("an error of no known kind: %v", err)
		}
		total := 0
		for _, n := range names {
			total += len(n)
		}
		if total > len(b) {
			t.Fatalf("%d bytes of names from %d bytes", total, len(b))
		}
	})
}
