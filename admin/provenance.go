package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/oci"
)

// Provenance is what maiden audit verify -provenance found: the call
// records that name an oci:// component, each component digest they name
// and whether a key agent.toml configures signed it.
type Provenance struct {
	// Records counts the records that name a component; Local those of
	// calls of local tools, which name none (no provenance to check).
	Records, Local int64
	Components     []ProvenanceComponent
	// Failed counts the components whose check failed.
	Failed int
}

// ProvenanceComponent is one recorded component digest and the signer the
// records name for it.
type ProvenanceComponent struct {
	Digest string
	Signer string   // the key ID or keyless signer the records name ("" when none verified it at load)
	Tools  []string // the tools whose records name it, sorted
	// Records counts the records naming this digest and signer.
	Records int64
	// KeyFile is the configured key whose ID is Signer, or for a keyless
	// signer the trusted root its bundle verified against ("" if none).
	KeyFile string
	// Problem says why the check failed ("" when it passed).
	Problem string
}

// VerifyProvenance re-checks, offline, the chain from the signature to the
// audit record: for each component digest the trail's call records name,
// the signer they name must be a key agent.toml configures (a tool's
// verify.key) or a keyless identity it configures (verify.issuer and
// verify.identity), and the component store (maiden pull's, the same one
// every load reads) must hold that key's signature, or that identity's
// Sigstore bundle, over that digest, which must verify (a bundle against
// the trusted root of a tool configuring that identity). A digest recorded
// with no signer fails too: nothing signed it. storeDir is the component store's directory ("": $MAIDEN_OCI_STORE,
// else the user cache directory's maiden/oci, as every load reads). The
// trail is read whole, oldest first; what it finds is reported, not
// returned as an error (the error is for a trail, a store or a key file
// that cannot be read).
func (s *State) VerifyProvenance(ctx context.Context, cfg *config.Config, storeDir string) (Provenance, error) {
	if storeDir == "" {
		storeDir = oci.DefaultStoreDir()
	}
	st, err := oci.OpenStore(storeDir)
	if err != nil {
		return Provenance{}, err
	}
	keys := map[string]string{} // key ID -> file
	parsed := map[string]*oci.Key{}
	for _, t := range cfg.Tools() {
		if t.OCI == nil || t.OCI.Key == "" {
			continue
		}
		if _, ok := parsed[t.OCI.Key]; ok {
			continue
		}
		b, err := os.ReadFile(t.OCI.Key)
		if err != nil {
			return Provenance{}, fmt.Errorf("tools.%s.verify.key: %w", t.Name, err)
		}
		k, err := oci.ParseKey(b)
		if err != nil {
			return Provenance{}, fmt.Errorf("tools.%s.verify.key %s: %w", t.Name, t.OCI.Key, err)
		}
		parsed[t.OCI.Key] = k
		keys[k.ID] = t.OCI.Key
	}
	// Keyless signer -> the policies that name it (one per distinct trusted
	// root and log requirement).
	keyless := map[string][]*oci.Keyless{}
	roots := map[*oci.Keyless]string{}
	seen := map[config.KeylessVerify]bool{}
	for _, t := range cfg.Tools() {
		if t.OCI == nil || t.OCI.Keyless == nil || seen[*t.OCI.Keyless] {
			continue
		}
		seen[*t.OCI.Keyless] = true
		kl, err := config.LoadKeyless(t.OCI.Keyless)
		if err != nil {
			return Provenance{}, fmt.Errorf("tools.%s.%w", t.Name, err)
		}
		keyless[kl.ID] = append(keyless[kl.ID], kl)
		roots[kl] = t.OCI.Keyless.TrustedRoot
	}
	type id struct{ digest, signer string }
	found := map[id]*ProvenanceComponent{}
	var p Provenance
	const page = 1000
	for after := int64(0); ; {
		recs, err := s.AuditTail(ctx, after, page)
		if err != nil {
			return Provenance{}, err
		}
		for _, r := range recs {
			after = r.Seq
			switch r.Kind {
			case AuditCallAdmitted, AuditCallRefused, AuditCallFailed, AuditCallSucceeded:
			default:
				continue
			}
			var b struct {
				Component string `json:"component"`
				Signer    string `json:"signer"`
			}
			if json.Unmarshal(r.Body, &b) != nil || b.Component == "" {
				if r.Kind == AuditCallAdmitted {
					p.Local++
				}
				continue
			}
			p.Records++
			c := found[id{b.Component, b.Signer}]
			if c == nil {
				c = &ProvenanceComponent{Digest: b.Component, Signer: b.Signer}
				found[id{b.Component, b.Signer}] = c
			}
			c.Records++
			if !slices.Contains(c.Tools, r.Tool) {
				c.Tools = append(c.Tools, r.Tool)
			}
		}
		if len(recs) < page {
			break
		}
	}
	for _, c := range found {
		file, isKey := keys[c.Signer]
		switch pols := keyless[c.Signer]; {
		case c.Signer == "":
			c.Problem = "recorded unsigned: no key verified it when it was loaded"
		case isKey:
			c.KeyFile = file
			if err := st.VerifySignature(c.Digest, parsed[file]); err != nil {
				c.Problem = err.Error()
			}
		case len(pols) > 0:
			// One configured trusted root accepting the stored bundle is
			// enough, as one verifying key is.
			var why []string
			for _, kl := range pols {
				err := st.VerifyBundle(c.Digest, kl)
				if err == nil {
					c.KeyFile, why = roots[kl], nil
					break
				}
				why = append(why, err.Error())
			}
			c.Problem = strings.Join(why, "; ")
		default:
			c.Problem = fmt.Sprintf("signer %s is not a key (verify.key) or a keyless identity (verify.issuer, verify.identity) agent.toml configures", c.Signer)
		}
		if c.Problem != "" {
			p.Failed++
		}
		slices.Sort(c.Tools)
		p.Components = append(p.Components, *c)
	}
	slices.SortFunc(p.Components, func(a, b ProvenanceComponent) int {
		return cmp.Or(strings.Compare(a.Digest, b.Digest), strings.Compare(a.Signer, b.Signer))
	})
	return p, nil
}
