package metrics

import (
	"errors"
	"fmt"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestCallKindOfIssue11Errors: an unknown agent and a state store that
// cannot answer are labelled apart from other errors, so an outage can be
// alerted on.
func TestCallKindOfIssue11Errors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w \"x\"", maiden.ErrUnknownAgent), "unknown-agent"},
		{fmt.Errorf("%w: disk I/O error", maiden.ErrState), "state"},
		{errors.New("something else"), "error"},
	} {
		if got := callKind(maiden.CallEvent{Err: tc.err}); got != tc.want {
			t.Errorf("%v: kind %q, want %q", tc.err, got, tc.want)
		}
	}
}
