package admin

import (
	"testing"

	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/secret"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/whatif"
)

// TestWhatIfKinds: the replay reads the records the call path writes, by
// their kinds; internal/whatif, which imports no store, spells them itself.
func TestWhatIfKinds(t *testing.T) {
	for _, k := range []struct{ replay, written string }{
		{whatif.KindCallAdmitted, store.AuditCallAdmitted},
		{whatif.KindCallRefused, store.AuditCallRefused},
		{whatif.KindFetch, store.AuditFetch},
		{whatif.KindReveal, secret.AuditReveal},
		{whatif.KindApproval, store.AuditApproval},
		{whatif.KindCallFailed, callaudit.KindCallFailed},
	} {
		if k.replay != k.written {
			t.Errorf("internal/whatif reads %q records, the call path writes %q", k.replay, k.written)
		}
	}
}

// TestWhatIfBindingKey: the replay binds an asked call's always question
// to the binding its approval request recorded, as the store keys the
// always-card minted from it.
func TestWhatIfBindingKey(t *testing.T) {
	for _, b := range []store.Binding{
		{ToolDigest: "sha256:aaaa", Policy: `{"hosts":["api.example.com"],"timeout_ms":1000}`},
		{ToolDigest: "", Policy: ""},
		{ToolDigest: "wasm:1234", Policy: `{}`},
	} {
		if got, want := whatif.BindingKey(b.ToolDigest, b.Policy), b.Key(); got != want {
			t.Errorf("whatif.BindingKey(%q, %q) = %q, store's Key = %q", b.ToolDigest, b.Policy, got, want)
		}
	}
}
