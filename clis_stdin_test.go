package maiden_test

import (
	"context"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestWrappedCLIStdinIsAuthorized: a wrapped CLI's stdin is a value the
// program gets like an argument (sqlite3, jq, kubectl apply -f -, sh -s
// read their program from it), so the cards must see it: it is part of
// the call's rendering (--stdin=TEXT, as a JSON-input tool's "stdin"
// property renders), and a grant that does not name it (nor --...)
// refuses a call that carries one.
func TestWrappedCLIStdinIsAuthorized(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.cat]
path = "/bin/cat"
command = '{"maiden_command": 1, "name": "cat", "stdin": {"media_type": "text/plain"}}'
[agents.bare]
tools = ["cat"]
grants = ["tool:invoke cat"]
[agents.pinned]
tools = ["cat"]
grants = ["tool:invoke cat --stdin=hello"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	call := func(agent, in string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: "cat", Input: in})
		if err != nil {
			t.Fatalf("%s %s: %v", agent, in, err)
		}
		return res
	}
	if res := call("bare", `{}`); !res.OK {
		t.Fatalf("no stdin under tool:invoke cat: %+v", res.Error)
	}
	if res := call("bare", `{"stdin":".shell touch /tmp/owned"}`); res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("stdin the card does not name reached the program: ok %v output %q error %+v", res.OK, res.Output, res.Error)
	}
	if res := call("pinned", `{"stdin":"hello"}`); !res.OK || res.Output != "hello" {
		t.Fatalf("stdin the card names: %+v %+v", res, res.Error)
	}
	wantKind(t, call("pinned", `{"stdin":"goodbye"}`), maiden.KindDenied, "")
}
