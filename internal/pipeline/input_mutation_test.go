package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestInputLimitIsExact: an input of exactly the limit's size is read;
// one byte more is refused, kind input, with the one message for it.
func TestInputLimitIsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit = 64
	h, _ := testHost(t, t.TempDir(), "version = 1\n[tools.echo]\npath = \""+testkit.Component(t, "echo")+"\"\n",
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), MaxInputBytes: limit})
	defer h.Close(ctx)
	at := `{"message":"` + strings.Repeat("a", limit-len(`{"message":""}`)) + `"}`
	if res, err := h.Call(ctx, Call{Tool: "echo", Input: at}); err != nil || !res.OK {
		t.Errorf("an input of exactly %d bytes: %v %+v; want it run", len(at), err, res.Error)
	}
	over := at[:len(at)-2] + `a"}`
	res, err := h.Call(ctx, Call{Tool: "echo", Input: over})
	if err != nil || res.OK || res.Error.Kind != KindInput || res.Error.Message != InputTooLarge(limit+1, limit) {
		t.Errorf("an input of %d bytes over a %d-byte limit: %v %+v; want kind input: %s", len(over), limit, err, res.Error, InputTooLarge(limit+1, limit))
	}
}
