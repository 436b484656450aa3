package session

import (
	"strings"
	"testing"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/store"
)

// TestMaterialNotResurrectedByStaleSession: a web_fetch reads its session
// (network on), then the session ends or is downgraded (its material
// dropped), then the web_fetch resolves its material from the session it
// read before. It must neither get the material nor leave it held: the
// session ended, and nothing would ever drop it again (BOUNDARIES.md,
// "Secret material": stripped when the session ends).
func TestMaterialNotResurrectedByStaleSession(t *testing.T) {
	s := store.Session{ID: "s1", Agent: "a", Boundary: boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Network: true}}
	b := config.Binding{Tool: "web_fetch", Credential: "API_TOKEN"}
	lookup := func(name string) (string, bool) { return "v-" + name, true }
	var ms Materials

	mark := ms.Mark() // the web_fetch, before it reads its session
	ms.Drop("s1")     // EndSession (or a downgrade) between the read and Resolve
	m, terr := ms.ResolveSince(mark, s, b, lookup)
	if terr == nil || m.Connection != nil {
		t.Errorf("Resolve from a session read before its material was dropped: material %+v, refusal %v; want a refusal and no material", m, terr)
	}
	if ms.Held("s1") {
		t.Errorf("the ended session holds its secret material again after a racing web_fetch resolved it")
	}

	// A web_fetch that read the session after the drop resolves it again.
	if m, terr := ms.ResolveSince(ms.Mark(), s, b, lookup); terr != nil || m.Connection == nil || !ms.Held("s1") {
		t.Errorf("a fresh web_fetch: material %+v, refusal %v; want it resolved", m, terr)
	}
}

// TestMaterialReadAtEveryCall: a session's web_fetch material is read from
// the host at every call (docs/credentials.md, "Rotation": a secret's
// value is read at every call), so a secret the operator rotated is sent
// with its new value from the next call on, and one removed refuses the
// call; before, the value the session first resolved was kept for the
// whole session, old key and all.
func TestMaterialReadAtEveryCall(t *testing.T) {
	var ms Materials
	s := store.Session{ID: "s1", Boundary: boundary.Boundary{Kind: boundary.Managed, Network: true}}
	b := config.Binding{Credential: "API_TOKEN"}
	value, set := "key-old", true
	lookup := func(name string) (string, bool) { return value, set && name == "API_TOKEN" }
	for _, want := range []string{"key-old", "key-new"} {
		value = want
		m, terr := ms.Resolve(s, b, lookup)
		if terr != nil || m.Connection == nil || m.Connection.Value != want {
			t.Fatalf("material %+v, refusal %v; want the credential's current value %q", m, terr, want)
		}
	}
	set = false
	if _, terr := ms.Resolve(s, b, lookup); terr == nil || !strings.Contains(terr.Message, "not configured") {
		t.Fatalf("a secret removed from the host: refusal %v, want credential_not_configured", terr)
	}
	if ms.Held("s1") {
		t.Error("the session still holds material whose secret is gone")
	}
}
