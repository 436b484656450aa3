package egress

import "errors"

var (
	// ErrInvalidPolicy is wrapped by NewPolicy's errors: a pattern that is
	// not in normalised form, or a CA file without certificates.
	ErrInvalidPolicy = errors.New("invalid egress policy")
	// ErrDenied is wrapped by the error the transport's dialer returns when
	// a resolved address is refused; Fetch turns it into a denied result.
	ErrDenied = errors.New("denied by egress policy")
)

// deniedError carries a Ruling through net/http's error wrapping, from
// the dialer (where addresses are checked) back to Fetch.
type deniedError struct{ d Ruling }

func (e *deniedError) Error() string { return e.d.Reason }
func (e *deniedError) Unwrap() error { return ErrDenied }
