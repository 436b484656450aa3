package session

import "testing"

// TestSessionID: a call that names a session runs in it, whatever its
// credential; one that names none runs in the default session of its agent
// and credential, so two tokens of one agent never share a default (and a
// boundary widened in one is not the other's), while a call with no
// credential keeps the agent's.
func TestSessionID(t *testing.T) {
	for _, c := range []struct {
		name string
		call Call
		want string
	}{
		{"named", Call{Agent: "alice", ID: "ses_1", Credential: "token:0123456789abcdef"}, "ses_1"},
		{"no credential", Call{Agent: "alice"}, "default-alice"},
		{"token A", Call{Agent: "alice", Credential: "token:0123456789abcdef"}, "default-alice/token:0123456789abcdef"},
		{"token B", Call{Agent: "alice", Credential: "token:fedcba9876543210"}, "default-alice/token:fedcba9876543210"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.call.SessionID(); got != c.want {
				t.Errorf("SessionID() = %q, want %q", got, c.want)
			}
		})
	}
}
