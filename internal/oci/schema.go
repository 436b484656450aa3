package oci

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/internal/regfile"
)

// ErrSchemaChanged means a pinned tool's component reports a definition
// (description, input schema, output schema) whose hash is not the one
// agent.toml pins (schema = "sha256:..."): what an agent would be shown is
// not what the operator reviewed when the tool was added. Callers test
// with errors.Is.
var ErrSchemaChanged = errors.New("the tool's schema differs from the pinned one")

// maxSchemaDocBytes bounds a stored schema document: the input and output
// schemas are each bounded by the schema checker (jsonschema's 1 MiB), the
// description by the component's own limits.
const maxSchemaDocBytes = 4 << 20

// SchemaDoc is the canonical JSON of what a tool tells an agent about
// itself (SEP-1766 style schema pinning), and its hash, "sha256:HEX":
//
//	{"description":"...","input_schema":{...},"output_schema":{...}}
//
// The keys are in that order; a schema that is JSON is re-encoded with its
// object keys sorted, no insignificant whitespace, numbers as written and
// no HTML escaping, so two encodings of one schema hash alike; a schema
// that is not JSON is kept as a string, and output_schema is null when
// the tool declares none. input is the input schema as tools/list serves
// it.
func SchemaDoc(description, input, output string) (hash string, doc []byte) {
	var b bytes.Buffer
	b.WriteString(`{"description":`)
	writeCanonical(&b, description, false)
	b.WriteString(`,"input_schema":`)
	writeCanonical(&b, input, true)
	b.WriteString(`,"output_schema":`)
	if output == "" {
		b.WriteString("null")
	} else {
		writeCanonical(&b, output, true)
	}
	b.WriteString("}")
	sum := sha256.Sum256(b.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:]), b.Bytes()
}

// writeCanonical writes s as a JSON string, or (asJSON) as the canonical
// form of the JSON value it holds.
func writeCanonical(b *bytes.Buffer, s string, asJSON bool) {
	var v any = s
	if asJSON {
		d := json.NewDecoder(bytes.NewReader([]byte(s)))
		d.UseNumber()
		var parsed any
		if err := d.Decode(&parsed); err == nil && !d.More() {
			v = parsed // maps marshal with sorted keys
		}
	}
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)       // strings, json.Number, maps and slices of them: cannot fail
	b.Truncate(b.Len() - 1) // Encode's newline
}

// ValidSchemaHash reports whether s is a schema hash's form, sha256:HEX.
func ValidSchemaHash(s string) bool { return digestRE.MatchString(s) }

// PutSchema stores a schema document (SchemaDoc's) under its hash, beside
// the components: blobs/sha256/HEX, content-addressed like them.
func (s *Store) PutSchema(doc []byte) (string, error) {
	sum := sha256.Sum256(doc)
	hash := "sha256:" + hex.EncodeToString(sum[:])
	if err := atomicfile.Write(s.blob(hash), doc, 0o600); err != nil {
		return "", fmt.Errorf("%w: %v", ErrStore, err)
	}
	return hash, nil
}

// LoadSchema is the schema document stored under hash, verified: it
// hashes to hash. It wraps ErrNotInStore when the store does not hold it
// (maiden pull records it) and ErrDigestMismatch when what it holds was
// changed.
func (s *Store) LoadSchema(hash string) ([]byte, error) {
	if !digestRE.MatchString(hash) {
		return nil, fmt.Errorf("schema %q: %w: want sha256: and 64 lowercase hex digits", hash, ErrBadRef)
	}
	doc, err := regfile.Read(s.blob(hash), maxSchemaDocBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("schema %s: %w (%s): run maiden pull", hash, ErrNotInStore, s.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w: %v", hash, ErrStore, err)
	}
	if err := checkDigest(doc, hash); err != nil {
		return nil, fmt.Errorf("stored schema %s: %w", hash, err)
	}
	return doc, nil
}

// SchemaError is a pinned tool whose component reports another schema
// than the pinned one; it matches ErrSchemaChanged.
type SchemaError struct {
	Tool   string // the tool's name in agent.toml
	Ref    string // its oci:// reference
	Pinned string // agent.toml's schema
	Got    string // the hash of what the component reports
}

func (e *SchemaError) Error() string {
	exact := e.Ref // maiden add pins exactly this digest, not what a tag names now
	if r, err := ParseRef(e.Ref); err == nil {
		r.Tag = ""
		exact = r.String()
	}
	return fmt.Sprintf("tool %s: %v: %s reports schema %s, agent.toml pins %s (tools.%s.schema), so it does not load; "+
		"if the new definition is reviewed and wanted, remove [tools.%s] and run maiden add %s %s to pin it, else restore the path that reported %s",
		e.Tool, ErrSchemaChanged, e.Ref, e.Got, e.Pinned, e.Tool, e.Tool, exact, e.Tool, e.Pinned)
}

func (e *SchemaError) Is(target error) bool { return target == ErrSchemaChanged }
