package capread

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

var errBig = errors.New("too large")

// TestBody: a body of exactly the limit reads whole, one byte more fails
// with the error given (whatever the reads' sizes), and a body under the
// limit reads whole.
func TestBody(t *testing.T) {
	for _, tc := range []struct {
		body string
		max  int64
		ok   bool
	}{{"", 0, true}, {"abc", 3, true}, {"abc", 10, true}, {"abcd", 3, false}, {"a", 0, false}} {
		for name, wrap := range map[string]func(io.Reader) io.Reader{"whole": func(r io.Reader) io.Reader { return r }, "byte at a time": iotest.OneByteReader} {
			b := New(io.NopCloser(wrap(strings.NewReader(tc.body))), tc.max, errBig)
			got, err := io.ReadAll(b)
			if tc.ok && (err != nil || string(got) != tc.body) {
				t.Errorf("%s %q max %d: %q %v, want it whole", name, tc.body, tc.max, got, err)
			}
			if !tc.ok && (!errors.Is(err, errBig) || int64(len(got)) > tc.max) {
				t.Errorf("%s %q max %d: %q %v, want %v after at most %d bytes", name, tc.body, tc.max, got, err, errBig, tc.max)
			}
		}
	}
}
