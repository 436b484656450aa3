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
// records that name a WebAssembly component, each component digest they
// name (an oci:// manifest digest, or a local file's SHA-256) and whether
// a key agent.toml configures signed it, and each schema hash they name
// against agent.toml's pin.
type Provenance struct {
	// Records counts the call records that name a component; Unnamed the
	// call-admitted records that name none: wrapped CLIs, MCP imports and
	// built-ins (no component), and local tools' calls recorded before
	// records named a local file's digest.
	Records, Unnamed int64
	Components       []ProvenanceComponent
	// Failed counts the components whose check failed.
	Failed int
	// SchemaMismatches are the records naming a schema hash other than the
	// one agent.toml pins for their tool at the digest they name, in trail
	// order, the first MaxSchemaMismatches; SchemaFailed counts them all.
	SchemaMismatches []SchemaMismatch
	SchemaFailed     int64
}

// MaxSchemaMismatches caps Provenance.SchemaMismatches (a trail rewritten
// wholesale would otherwise be listed whole).
const MaxSchemaMismatches = 100

// SchemaMismatch is a call record whose schema hash is not the one
// agent.toml pins (tools.NAME.schema) for the component digest it names.
type SchemaMismatch struct {
	Seq       int64  // the record's number
	Tool      string // the record's tool
	Component string // the digest it names, the one agent.toml pins
	Recorded  string // the schema hash it names
	Pinned    string // agent.toml's schema pin
}

// ProvenanceComponent is one recorded component digest and the signer the
// records name for it.
type ProvenanceComponent struct {
	Digest string
	Signer string // the key ID or keyless signer the records name ("" when none verified it at load)
	// Local is a local file's SHA-256 (records marking it
	// component_local), not an oci:// manifest digest: nothing signed it,
	// which fails only when agent.toml sets require_signatures.
	Local bool
	Tools []string // the tools whose records name it, sorted
	// Records counts the records naming this digest and signer.
	Records int64
	// KeyFile is the configured key whose ID is Signer, or for a keyless
	// signer the trusted root its bundle verified against ("" if none).
	KeyFile string
	// Problem says why the check failed ("" when it passed).
	Problem string
	// Schemas are the definition hashes these records name, sorted (""
	// first: records naming none, made before records named it).
	Schemas []ProvenanceSchema
}

// ProvenanceSchema is one schema hash the records of a component name,
// and how many of them agent.toml's pin was compared with.
type ProvenanceSchema struct {
	Hash    string // "" for records naming none
	Records int64
	// Matched counts the records whose tool agent.toml pins to this hash
	// at this digest; Mismatched those it pins to another (each in
	// Provenance.SchemaMismatches); the rest were not compared (no pin
	// for their tool at this digest: a local tool, an oci:// table
	// without schema, or one that pins another digest now).
	Matched, Mismatched int64
}

// VerifyProvenance re-checks, offline, the chain from the signature to the
// audit record: for each component digest the trail's call records name,
// the signer they name must be a key agent.toml configures (a tool's
// verify.key) or a keyless identity it configures (verify.issuer and
// verify.identity), and the component store (maiden pull's, the same one
// every load reads) must hold that key's signature, or that identity's
// Sigstore bundle, over that digest, which must verify (a bundle against
// the trusted root of a tool configuring that identity). A digest recorded
// with no signer fails too: nothing signed it. A local file's digest
// (component_local) has no signature to check: it passes, unless
// agent.toml sets require_signatures = true. Each record's schema hash is
// compared with the pin (tools.NAME.schema) of its tool when agent.toml
// pins that tool to the digest the record names: another hash is a
// SchemaMismatch. Records naming no schema (made before records named
// one) are counted, not failed. storeDir is the component store's directory ("": $MAIDEN_OCI_STORE,
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
	// The schema pins: tool -> digest pinned -> schema.
	type pin struct{ digest, schema string }
	pins := map[string]pin{}
	for _, t := range cfg.Tools() {
		if t.OCI != nil && t.OCI.Schema != "" {
			pins[t.Name] = pin{t.OCI.Digest, t.OCI.Schema}
		}
	}
	type id struct {
		digest, signer string
		local          bool
	}
	found := map[id]*ProvenanceComponent{}
	schemas := map[id]map[string]*ProvenanceSchema{}
	var p Provenance
	const page = 1000
	for after := int64(0); ; {
		// A page bounded by its bodies' bytes too, as a what-if's.
		recs, err := s.st.AuditPage(ctx, after, page, AuditPageBytes)
		if err != nil {
			return Provenance{}, err
		}
		if len(recs) == 0 {
			break
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
				Local     bool   `json:"component_local"`
				Signer    string `json:"signer"`
				Schema    string `json:"schema"`
			}
			if json.Unmarshal(r.Body, &b) != nil || b.Component == "" {
				if r.Kind == AuditCallAdmitted {
					p.Unnamed++
				}
				continue
			}
			p.Records++
			k := id{b.Component, b.Signer, b.Local}
			c := found[k]
			if c == nil {
				c = &ProvenanceComponent{Digest: b.Component, Signer: b.Signer, Local: b.Local}
				found[k] = c
				schemas[k] = map[string]*ProvenanceSchema{}
			}
			c.Records++
			if !slices.Contains(c.Tools, r.Tool) {
				c.Tools = append(c.Tools, r.Tool)
			}
			sc := schemas[k][b.Schema]
			if sc == nil {
				sc = &ProvenanceSchema{Hash: b.Schema}
				schemas[k][b.Schema] = sc
			}
			sc.Records++
			if pn, ok := pins[r.Tool]; ok && !b.Local && b.Schema != "" && pn.digest == b.Component {
				if b.Schema == pn.schema {
					sc.Matched++
				} else {
					sc.Mismatched++
					p.SchemaFailed++
					if len(p.SchemaMismatches) < MaxSchemaMismatches {
						p.SchemaMismatches = append(p.SchemaMismatches, SchemaMismatch{Seq: r.Seq, Tool: r.Tool, Component: b.Component, Recorded: b.Schema, Pinned: pn.schema})
					}
				}
			}
		}
	}
	for k, c := range found {
		file, isKey := keys[c.Signer]
		switch pols := keyless[c.Signer]; {
		case c.Local:
			if cfg.RequireSignatures() {
				c.Problem = "a local file, which nothing signed, and agent.toml sets require_signatures = true"
			}
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
		for _, sc := range schemas[k] {
			c.Schemas = append(c.Schemas, *sc)
		}
		slices.SortFunc(c.Schemas, func(a, b ProvenanceSchema) int { return strings.Compare(a.Hash, b.Hash) })
		p.Components = append(p.Components, *c)
	}
	slices.SortFunc(p.Components, func(a, b ProvenanceComponent) int {
		return cmp.Or(strings.Compare(a.Digest, b.Digest), strings.Compare(a.Signer, b.Signer), cmpBool(a.Local, b.Local))
	})
	return p, nil
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
