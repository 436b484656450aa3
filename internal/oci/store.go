package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/internal/regfile"
)

// Store is the local content-addressed store of pulled components:
//
//	DIR/blobs/sha256/HEX              manifests and component layers, by digest
//	DIR/signatures/HEX-KEYHEX.json    the signature by key KEYHEX that verified
//	                                  manifest HEX when it was pulled
//
// Every Load hashes what it returns against the digest that names it. The
// component file's path is handed to the runtime, which reads it again
// after Load: that time-of-check/time-of-use gap is closed by the runtime
// opening the file pinned to Component.Layer (config.OCISource.Layer,
// sandbox.Runner.OpenPinned), each runner refusing bytes that hash to
// another digest before compiling or running them. The directory must
// also be this user's own (OpenStore refuses one that another user owns
// or can write, or that sits under a directory they could replace it
// from), as defence in depth: the same rule as the compiled-component
// cache's.
type Store struct{ dir string }

// Component is a verified component in the store.
type Component struct {
	Ref    Ref    // pinned
	Path   string // the component's .wasm bytes (DIR/blobs/sha256/LAYERHEX)
	Digest string // the manifest digest: what agent.toml pins and the audit trail names
	Layer  string // the component layer's digest
	Signer string // the verifying key's ID ("sha256:..."); "" when no key was asked for
}

// OpenStore creates dir (mode 0700) if needed and refuses it unless it is
// this user's own: dir (links resolved once, as the store then works
// beneath the real path) and its subdirectories must be directories of
// this user's that no group or other user can write, and every ancestor
// must be root's or this user's and writable by no one else unless sticky
// (checkOwnDirs). A directory another user owns, or one whose parent they
// can write, lets them swap a component's file after Load verified it
// (which the runtime then refuses: the tool stops loading). An empty dir
// (DefaultStoreDir when no cache directory is known) is refused.
func OpenStore(dir string) (*Store, error) {
	if dir == "" {
		// filepath.Abs would make it the working directory.
		return nil, fmt.Errorf("%w: no directory for the component store: set $%s, or $XDG_CACHE_HOME or $HOME for the user cache directory", ErrStore, StoreEnv)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrStore, dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	subs := []string{filepath.Join(real, "blobs"), filepath.Join(real, "blobs", "sha256"), filepath.Join(real, "signatures")}
	for _, d := range subs {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %v", ErrStore, err)
		}
	}
	if err := checkOwnDirs(real, subs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	return &Store{dir: real}, nil
}

// Dir is the store's absolute directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) blob(digest string) string {
	return filepath.Join(s.dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

func (s *Store) sigFile(digest string, k *Key) string {
	return filepath.Join(s.dir, "signatures", strings.TrimPrefix(digest, "sha256:")+"-"+strings.TrimPrefix(k.ID, "sha256:")+".json")
}

// bundleFile is where the Sigstore bundle that verified digest for the
// keyless signer id is kept: named by the SHA-256 of id, which holds an
// issuer URL and an identity no file name should carry.
func (s *Store) bundleFile(digest, id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(s.dir, "signatures", strings.TrimPrefix(digest, "sha256:")+"-keyless-"+hex.EncodeToString(sum[:])+".bundle.json")
}

// Load returns the pinned component r from the store, verified: the
// manifest hashes to r's digest and describes one component layer, the
// layer hashes to the manifest's digest for it, and with key the stored
// signature verifies with key over r's digest. It never uses the network.
func (s *Store) Load(r Ref, key *Key) (Component, error) {
	if key == nil {
		return s.load(r, nil)
	}
	return s.load(r, func(c *Component) error {
		b, err := regfile.Read(s.sigFile(r.Digest, key), maxSignatureBytes*2)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w by key %s in the store: run maiden pull", ErrUnsigned, key.ID)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrStore, err)
		}
		var sig signature
		if err := json.Unmarshal(b, &sig); err != nil {
			return fmt.Errorf("%w: stored signature does not parse", ErrBadSignature)
		}
		if _, err := key.verify([]signature{sig}, r.Digest); err != nil {
			return err
		}
		c.Signer = key.ID
		return nil
	})
}

// LoadKeyless is Load with a keyless policy: the Sigstore bundle a pull
// verified and kept beside the component must verify again, offline,
// against kl's trusted root, identity and issuer.
func (s *Store) LoadKeyless(r Ref, kl *Keyless) (Component, error) {
	if kl == nil {
		return s.load(r, nil)
	}
	return s.load(r, func(c *Component) error {
		if err := s.verifyBundle(r.Digest, kl); err != nil {
			return err
		}
		c.Signer = kl.ID
		return nil
	})
}

// load checks the manifest and the layer, then runs check (the
// signature's, when one is asked for).
func (s *Store) load(r Ref, check func(*Component) error) (Component, error) {
	if !r.Pinned() {
		return Component{}, fmt.Errorf("load %s: %w", r, ErrNotPinned)
	}
	manifest, err := regfile.Read(s.blob(r.Digest), MaxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Component{}, fmt.Errorf("load %s: %w (%s): run maiden pull", r, ErrNotInStore, s.dir)
	}
	if err != nil {
		return Component{}, fmt.Errorf("load %s: %w: %v", r, ErrStore, err)
	}
	if err := checkDigest(manifest, r.Digest); err != nil {
		return Component{}, fmt.Errorf("load %s: stored manifest: %w", r, err)
	}
	layer, err := componentLayer(manifest)
	if err != nil {
		return Component{}, fmt.Errorf("load %s: %w", r, err)
	}
	path := s.blob(layer.Digest.String())
	if err := hashFile(path, layer.Digest.String(), layer.Size); err != nil {
		return Component{}, fmt.Errorf("load %s: stored component: %w", r, err)
	}
	c := Component{Ref: r, Path: path, Digest: r.Digest, Layer: layer.Digest.String()}
	if check != nil {
		if err := check(&c); err != nil {
			return Component{}, fmt.Errorf("load %s: %w", r, err)
		}
	}
	return c, nil
}

// hashFile checks that path holds exactly size bytes hashing to digest.
func hashFile(path, digest string, size int64) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: run maiden pull", ErrNotInStore)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", ErrStore, path)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, size+1))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if n != size || !digestEqual(got, digest) {
		return fmt.Errorf("%w: %d bytes hashing to %s, want %d bytes hashing to %s", ErrDigestMismatch, n, got, size, digest)
	}
	return nil
}

// put writes a verified manifest, its layer and (when one was checked)
// the evidence that verified it: evidence is written to evidenceFile. The
// layer goes first and the manifest last, so a reader that finds the
// manifest finds the layer; each write is atomic, so two processes pulling
// one digest at once write the same bytes and agree.
func (s *Store) put(manifest, layer, evidence []byte, evidenceFile, digest string) error {
	sum := sha256.Sum256(layer)
	if err := atomicfile.Write(s.blob("sha256:"+hex.EncodeToString(sum[:])), layer, 0o600); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	if evidence != nil {
		if err := atomicfile.Write(evidenceFile, evidence, 0o600); err != nil {
			return fmt.Errorf("%w: %v", ErrStore, err)
		}
	}
	if err := atomicfile.Write(s.blob(digest), manifest, 0o600); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}

// VerifySignature checks, offline, that the store holds a signature by key
// over digest (the one a pull verified and kept beside the component) and
// that it still verifies: the provenance check of a digest the audit
// trail recorded (maiden audit verify -provenance), which needs neither
// the component's bytes nor the network. It wraps ErrUnsigned when the
// store holds no signature by key for digest, ErrBadSignature when the
// one it holds does not verify.
func (s *Store) VerifySignature(digest string, key *Key) error {
	if !digestRE.MatchString(digest) {
		return fmt.Errorf("%w: digest %q: want sha256: and 64 lowercase hex digits", ErrBadSignature, digest)
	}
	b, err := regfile.Read(s.sigFile(digest, key), maxSignatureBytes*2)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: the store holds no signature of %s by key %s (run maiden pull with that key configured)", ErrUnsigned, digest, key.ID)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	var sig signature
	if err := json.Unmarshal(b, &sig); err != nil {
		return fmt.Errorf("%w: the stored signature of %s does not parse", ErrBadSignature, digest)
	}
	if _, err := key.verify([]signature{sig}, digest); err != nil {
		return err
	}
	return nil
}

// VerifyBundle is VerifySignature for a keyless policy: the store must
// hold the Sigstore bundle a pull verified for digest and kl's signer, and
// it must verify again, offline, against kl's trusted root. It wraps
// ErrUnsigned when the store holds none, ErrBadSignature when the one it
// holds does not verify.
func (s *Store) VerifyBundle(digest string, kl *Keyless) error {
	if !digestRE.MatchString(digest) {
		return fmt.Errorf("%w: digest %q: want sha256: and 64 lowercase hex digits", ErrBadSignature, digest)
	}
	return s.verifyBundle(digest, kl)
}

func (s *Store) verifyBundle(digest string, kl *Keyless) error {
	b, err := regfile.Read(s.bundleFile(digest, kl.ID), maxSignatureBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: the store holds no Sigstore bundle of %s by %s (run maiden pull with that verify configured)", ErrUnsigned, digest, kl.ID)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	_, err = kl.verify([][]byte{b}, digest)
	return err
}
