package pipeline

import (
	"crypto/subtle"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/oci"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// Schema pinning (docs/oci.md): an oci:// tool's agent.toml table may pin
// the hash of the definition its component reports (schema =
// "sha256:...", recorded by maiden add), so a new version that tells
// agents something else (a changed description is the classic tool
// poisoning) does not load under a digest bumped without review. The hash
// is oci.SchemaDoc's over what tools/list serves: the description, the
// input schema as served (a command description's JSON Schema
// projection) and the output schema.

// hash is the hash of the definition li reports, computed once per
// component version (by its digest).
func (s *toolSchemas) hash(li sandbox.LoadInfo) string {
	return s.hashes.Get(li.Digest, "", func(string) string {
		input := li.Schema
		if s := s.in.getTool(li.Digest, li.Schema); s.cmd != nil {
			input = s.text
		}
		hash, _ := oci.SchemaDoc(li.Description, input, li.OutputSchema)
		return hash
	})
}

// checkPin refuses a loaded component of t whose definition's hash
// is not the one t pins: the error wraps sandbox.ErrInvalidTool (the tool
// does not load, nothing runs) and oci.ErrSchemaChanged, and names the
// tool, both hashes and the fix. A tool pinning nothing passes.
func (s *toolSchemas) checkPin(t *config.Tool, li sandbox.LoadInfo) error {
	if t.OCI == nil || t.OCI.Schema == "" {
		return nil
	}
	got := s.hash(li)
	if subtle.ConstantTimeCompare([]byte(got), []byte(t.OCI.Schema)) == 1 {
		return nil
	}
	return schemaRefused{&oci.SchemaError{Tool: t.Name, Ref: t.OCI.Ref, Pinned: t.OCI.Schema, Got: got}}
}

// provenance is what tools/list says of where t's component came from.
func (s *toolSchemas) provenance(t config.Tool, li sandbox.LoadInfo) *Provenance {
	if t.OCI == nil {
		return nil
	}
	return &Provenance{Ref: t.OCI.Ref, Component: t.OCI.Digest, Signer: t.OCI.Signer, Schema: s.hash(li), SchemaPinned: t.OCI.Schema != ""}
}

// schemaRefused is a schema pin's refusal as a load failure.
type schemaRefused struct{ e *oci.SchemaError }

func (r schemaRefused) Error() string   { return r.e.Error() }
func (r schemaRefused) Unwrap() []error { return []error{sandbox.ErrInvalidTool, r.e} }
