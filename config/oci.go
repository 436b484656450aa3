package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/internal/oci"
)

// OCISource is where a tool's component came from when its path is an
// oci:// reference (docs/oci.md). Path is then the component's file in the
// local content-addressed store, verified when the configuration was
// loaded: the manifest hashed to Digest, the layer to the manifest's
// digest for it, and with Key the stored cosign signature verified.
type OCISource struct {
	Tool   string // the [tools.NAME] it is the path of
	Ref    string // as written: oci://REGISTRY/REPO[:TAG]@sha256:HEX
	Digest string // the pinned manifest digest
	// Layer is the digest ("sha256:HEX") of the component layer the store
	// verified Path as while loading. The file is read again later (to
	// compile, describe, on each reload): the runtime opens it pinned to
	// Layer and refuses bytes that hash to anything else, so a file
	// replaced after the check does not run, whoever can write the store.
	Layer string
	Key   string // absolute path of verify.key; "" when no key signature is checked
	// Keyless is verify = { issuer, identity, trusted_root }: a Sigstore
	// bundle checked offline against a trusted root; nil when none is.
	// At most one of Key and Keyless is set.
	Keyless *KeylessVerify
	// Signer names who verified the component: a key's ID ("sha256:" of
	// its DER encoding) or a keyless signer ("keyless:ISSUER IDENTITY");
	// "" when nothing is verified.
	Signer string
	// Credential names the secret (MAIDEN_SECRET_NAME: USER:PASSWORD or a
	// registry token) maiden pull logs in to the registry with
	// (registry_credential); "" means docker's config.json and credential
	// helpers. Only maiden pull reads it: a load never contacts a registry.
	Credential string
	// Schema is the pinned hash of the tool's definition (schema =
	// "sha256:...": oci.SchemaDoc of its description, input schema and
	// output schema, recorded by maiden add); "" when none is pinned. The
	// store holds the document, checked while loading; the runtime
	// refuses a component that reports another.
	Schema string
}

// ociPath is path = "oci://...": parsed now, resolved against the store in
// resolveOCI once the table's verify key is known.
func (c *checker) ociPath(line int, key, written string, t *Tool) {
	r, err := oci.ParseRef(written)
	if err != nil {
		c.errorf(line, key, "%v", err)
		return
	}
	if !r.Pinned() {
		c.errs = append(c.errs, &Error{File: c.file, Line: line, Key: key, Err: &oci.PinError{Ref: r},
			Msg: fmt.Sprintf("%s names a tag, which can move: pin its digest (maiden check prints it; maiden add %s NAME writes it)", quoteShort(written), r)})
		return
	}
	t.OCI = &OCISource{Ref: written, Digest: r.Digest}
}

// KeylessVerify is a keyless verify table (docs/oci.md): the component
// must carry a Sigstore bundle whose Fulcio certificate chains to a
// certificate authority of TrustedRoot and names Identity as issued by
// Issuer, with a transparency-log entry (or, with TransparencyLog false,
// a signed timestamp) that verifies against the same root.
type KeylessVerify struct {
	Issuer          string // the OIDC issuer, exactly
	Identity        string // the certificate's subject alternative name, exactly
	TrustedRoot     string // absolute path of Sigstore's trusted_root.json
	TransparencyLog bool   // transparency_log, default true
}

// verifySpec is what a verify table names: a key file or a keyless
// policy, or neither when the table was refused.
type verifySpec struct {
	key     string
	keyless *KeylessVerify
}

var verifyKeys = []string{"key", "issuer", "identity", "trusted_root", "transparency_log"}

// verifyTable reads verify = { key = "cosign.pub" } or
// verify = { issuer = "...", identity = "...", trusted_root = "trusted_root.json" }.
func (c *checker) verifyTable(n *tnode, kpath []string) verifySpec {
	key := formatKey(kpath)
	if n.kind != tableNode {
		c.errorf(n.line, key, `must be a table such as { key = "cosign.pub" } or { issuer = "https://...", identity = "...", trusted_root = "trusted_root.json" }, got %s`, describe(n))
		return verifySpec{}
	}
	before := len(c.errs)
	var file string
	kl := KeylessVerify{TransparencyLog: true}
	for _, k := range n.order {
		v := n.keys[k]
		kkey := key + "." + k
		switch k {
		case "key", "trusted_root":
			if s, line, ok := c.str(v, kkey); ok {
				if p, ok := c.regularFile(line, kkey, s); ok {
					if k == "key" {
						file = p
					} else {
						kl.TrustedRoot = p
					}
				}
			}
		case "issuer", "identity":
			if s, line, ok := c.str(v, kkey); ok {
				if s == "" || strings.ContainsAny(s, " \t\r\n") {
					c.errorf(line, kkey, "must be the exact %s, without spaces, got %s", map[string]string{"issuer": "OIDC issuer URL", "identity": "certificate identity (an email or a URI)"}[k], quoteShort(s))
				} else if k == "issuer" {
					kl.Issuer = s
				} else {
					kl.Identity = s
				}
			}
		case "transparency_log":
			kl.TransparencyLog = c.boolKey(v, kkey)
		default:
			c.unknownKey(v, append(slices.Clone(kpath), k), verifyKeys)
		}
	}
	_, hasKey := n.keys["key"]
	var keyless []string
	for _, k := range verifyKeys[1:] {
		if _, ok := n.keys[k]; ok {
			keyless = append(keyless, k)
		}
	}
	switch {
	case hasKey && len(keyless) > 0:
		c.errorf(n.line, key, "key verifies a cosign key's signature, %s a keyless one: give one or the other", strings.Join(keyless, ", "))
	case hasKey:
	case len(keyless) == 0:
		c.errorf(n.line, key+".key", "required key is missing: the cosign public key file the component must be signed with (or issuer, identity and trusted_root for a keyless signature)")
	default:
		for _, k := range verifyKeys[1:4] {
			if _, ok := n.keys[k]; !ok {
				c.errorf(n.line, key+"."+k, "required key is missing: a keyless verify names the issuer, the identity and the trusted_root file")
			}
		}
	}
	if len(c.errs) > before {
		return verifySpec{}
	}
	if hasKey {
		return verifySpec{key: file}
	}
	return verifySpec{keyless: &kl}
}

// ociWritten reports whether table n's path is written as an oci://
// reference (valid or not).
func (c *checker) ociWritten(n *tnode) bool {
	p, ok := n.keys["path"]
	return ok && p.kind == valueNode && strings.HasPrefix(p.val.text, oci.Scheme)
}

// resolveOCI finds a pinned tool's component in the local store.
func (c *checker) resolveOCI(t *Tool, line int) {
	key := "tools." + t.Name + ".path"
	r, err := oci.ParseRef(t.OCI.Ref)
	if err != nil {
		return // reported by ociPath
	}
	if c.files.component == nil {
		c.errorf(line, key, "oci:// components are not available here")
		return
	}
	comp, err := c.files.component(r, t.OCI)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, oci.ErrNotInStore) {
			msg = fmt.Sprintf("%q is not in the local component store: run maiden pull (it fetches every pinned tool of this file)", t.OCI.Ref)
		}
		c.errorf(line, key, "%s", msg)
		return
	}
	t.Path = comp.Path
	t.OCI.Layer = comp.Layer
	t.OCI.Signer = comp.Signer
	if t.OCI.Schema == "" {
		return
	}
	if c.files.schema == nil {
		c.errorf(line, "tools."+t.Name+".schema", "schema pins are not available here")
		return
	}
	if err := c.files.schema(t.OCI.Schema); err != nil {
		msg := err.Error()
		if errors.Is(err, oci.ErrNotInStore) {
			msg = fmt.Sprintf("the schema %s pins is not in the local component store: run maiden pull (it records the schema of every pinned tool of this file)", t.OCI.Schema)
		}
		c.errorf(line, "tools."+t.Name+".schema", "%s", msg)
	}
}

// schemaPin reads schema = "sha256:..." (the tool's pinned definition,
// docs/oci.md); refused beside a local path. oci tells whether path was
// written as an oci:// reference (t.OCI is nil if it was refused).
func (c *checker) schemaPin(n *tnode, kpath []string, t *Tool, ociWritten bool) bool {
	key := formatKey(kpath)
	s, line, ok := c.str(n, key)
	switch {
	case !ok:
		return false
	case !oci.ValidSchemaHash(s):
		c.errorf(line, key, "must be the hash maiden add recorded, sha256: and 64 lowercase hex digits, got %s", quoteShort(s))
		return false
	case t.OCI == nil && ociWritten:
		return true // path was an oci:// reference refused already
	case t.OCI == nil:
		c.errorf(line, key, "schema pins the definition of an oci:// component; path is a local file")
		return false
	}
	t.OCI.Schema = s
	return true
}

// osSchema checks the user's store (oci.DefaultStoreDir) holds the schema
// document hash names, unchanged.
func osSchema(hash string) error {
	st, err := oci.OpenStore(oci.DefaultStoreDir())
	if err != nil {
		return err
	}
	_, err = st.LoadSchema(hash)
	return err
}

// requireSignatures refuses, with require_signatures = true, every
// [tools.NAME] whose component no key or keyless identity verifies: a
// local file or an unsigned oci:// reference.
func (c *checker) requireSignatures(tools []Tool) {
	for _, t := range tools {
		if t.CLI != nil || t.MCP != nil {
			continue
		}
		if t.OCI == nil || (t.OCI.Key == "" && t.OCI.Keyless == nil) {
			what := "a local file"
			if t.OCI != nil {
				what = "an oci:// reference without verify"
			}
			c.errorf(t.Line, "tools."+t.Name+".verify", "require_signatures = true, and the tool's path is %s: give it an oci:// path and verify = { key = \"cosign.pub\" } or verify = { issuer = \"...\", identity = \"...\", trusted_root = \"trusted_root.json\" }", what)
		}
	}
}

// osComponent loads a pinned component from the user's store
// (oci.DefaultStoreDir), checking its signature with src's verify key or
// keyless policy if it has one.
func osComponent(r oci.Ref, src *OCISource) (oci.Component, error) {
	st, err := oci.OpenStore(oci.DefaultStoreDir())
	if err != nil {
		return oci.Component{}, err
	}
	if src.Keyless != nil {
		kl, err := LoadKeyless(src.Keyless)
		if err != nil {
			return oci.Component{}, err
		}
		return st.LoadKeyless(r, kl)
	}
	var key *oci.Key
	if src.Key != "" {
		b, err := ReadFile(src.Key, MaxFileBytes)
		if err != nil {
			return oci.Component{}, fmt.Errorf("verify key: %s", pathErrText(err))
		}
		if key, err = oci.ParseKey(b); err != nil {
			return oci.Component{}, fmt.Errorf("verify key %s: %v", src.Key, err)
		}
	}
	return st.Load(r, key)
}

// LoadKeyless reads kv's trusted root and makes its policy.
func LoadKeyless(kv *KeylessVerify) (*oci.Keyless, error) {
	b, err := ReadFile(kv.TrustedRoot, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("verify trusted_root: %s", pathErrText(err))
	}
	kl, err := oci.NewKeyless(b, kv.Issuer, kv.Identity, kv.TransparencyLog)
	if err != nil {
		return nil, fmt.Errorf("verify trusted_root %s: %v", kv.TrustedRoot, err)
	}
	return kl, nil
}

// Sources is the oci:// sources of the tools of the agent.toml at path,
// read without the store: what `maiden pull` fetches. Every other problem
// of the file is reported as Load reports it.
func Sources(path string) ([]OCISource, error) {
	data, err := ReadFile(path, MaxFileBytes)
	if err != nil {
		return nil, Errors{{File: path, Msg: "cannot read: " + pathErrText(err)}}
	}
	files := osFiles
	files.component = func(r oci.Ref, _ *OCISource) (oci.Component, error) {
		return oci.Component{Ref: r, Digest: r.Digest}, nil // not looked up
	}
	files.schema = func(string) error { return nil } // maiden pull records it
	cfg, err := parse(path, data, filepath.Dir(path), files)
	if err != nil {
		return nil, err
	}
	var out []OCISource
	for _, t := range cfg.tools {
		if t.OCI != nil {
			s := *t.OCI
			s.Tool = t.Name
			out = append(out, s)
		}
	}
	return out, nil
}
