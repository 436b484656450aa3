// Package oci fetches WebAssembly components from OCI registries into a
// local content-addressed store, and loads them from it offline.
//
// A tool names its component as oci://REGISTRY/REPO@sha256:HEX: the digest
// of the OCI manifest, whose one layer (media type application/wasm) is the
// component. Pull (the network half, used by `maiden add` and `maiden pull`)
// resolves a tag, checks sizes before downloading, refuses anything that is
// not a component, checks a cosign signature when a key is configured, and
// writes the manifest, the layer and the signature into the Store under
// their digests. Load (the offline half, used on every configuration load)
// re-hashes the stored manifest and layer against the pinned digest and
// re-checks the stored signature against the key, so a damaged, replaced or
// unsigned entry is refused and nothing runs.
//
//	st, _ := oci.OpenStore(oci.DefaultStoreDir())
//	ref, _ := oci.ParseRef("oci://ghcr.io/acme/echo:v1")
//	pinned, _ := oci.Resolve(ctx, ref, nil)          // the tag's digest
//	_, err := oci.Pull(ctx, pinned, st, &oci.PullOptions{Key: pub})
//	c, err := st.Load(pinned, pub)                  // offline, verified
//	// c.Path is the component's file; c.Digest and c.Signer go to the audit trail
//
// Registry credentials come from go-containerregistry's default keychain
// (docker config.json and its credential helpers); they are never written
// anywhere by this package. Plain HTTP is used only for a loopback registry.
// Each operation is bounded by a deadline (PullOptions.Timeout); a
// registry's redirect goes to https only, and every host but the
// registry's own is resolved and checked before it is dialled (net.go).
package oci

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Errors, each naming why a component is refused. Callers test with
// errors.Is.
var (
	// ErrNotPinned means a reference names a tag and no digest: a tag can
	// move, so a tool must be pinned (`maiden add` resolves and pins it).
	ErrNotPinned = errors.New("reference names a tag, not a digest")
	// ErrTagMoved means a reference names a tag and a digest, and the
	// registry's tag now names another digest: the pinned component is
	// not what the tag serves any more, so it is not pulled until an
	// operator reviews the new one (`maiden add` pins it).
	ErrTagMoved = errors.New("tag moved since it was pinned")
	// ErrBadRef means a reference could not be parsed.
	ErrBadRef = errors.New("malformed oci:// reference")
	// ErrDigestMismatch means bytes (from the registry or the store) do
	// not hash to the digest that names them.
	ErrDigestMismatch = errors.New("content does not match its digest")
	// ErrNotComponent means the manifest does not describe one
	// WebAssembly component (an image index, a container image, several
	// layers, a layer that is not a component).
	ErrNotComponent = errors.New("not a WebAssembly component artifact")
	// ErrTooLarge means a manifest or layer is over its cap; it is refused
	// before (or, if the registry lied about its size, while) downloading.
	ErrTooLarge = errors.New("over the size cap")
	// ErrNotInStore means the component has not been pulled on this
	// machine: run `maiden pull` (or `maiden add`).
	ErrNotInStore = errors.New("not in the local component store")
	// ErrUnsigned means no signature was found for the digest while a key
	// is configured.
	ErrUnsigned = errors.New("no signature")
	// ErrBadSignature means a signature exists but does not verify with
	// the configured key, or signs another digest.
	ErrBadSignature = errors.New("signature invalid")
	// ErrStore means the store directory is unsafe (writable by others, a
	// link) or unreadable.
	ErrStore = errors.New("component store refused")
)

// Media types of the WebAssembly OCI artifact layout (the CNCF wasm OCI
// artifact format that wkg, Wassette and wasm-pkg-tools push).
const (
	ConfigMediaType = "application/vnd.wasm.config.v0+json"
	LayerMediaType  = "application/wasm"
)

// Size caps, checked against the sizes the registry declares before
// anything is downloaded, and again while reading.
const (
	// MaxManifestBytes bounds a manifest (a component's is under 1 KiB).
	MaxManifestBytes = 1 << 20
	// MaxLayerBytes bounds a component (the largest here, a JavaScript
	// engine, is ~10 MB).
	MaxLayerBytes = 256 << 20
	// maxSignatureBytes bounds a signature payload (a few hundred bytes).
	maxSignatureBytes = 64 << 10
)

// PinError is an unpinned reference where a pinned one is needed; it
// matches ErrNotPinned. Ref is the reference, for a caller that can
// resolve it (maiden check prints the digest to pin).
type PinError struct{ Ref Ref }

func (e *PinError) Error() string        { return fmt.Sprintf("%s: %v", e.Ref, ErrNotPinned) }
func (e *PinError) Is(target error) bool { return target == ErrNotPinned }

// Ref is a parsed oci:// reference.
type Ref struct {
	Registry   string // host[:port]
	Repository string // path within the registry
	Tag        string // "" when pinned by digest only
	Digest     string // "sha256:" + 64 hex digits; "" when only a tag is named
}

// Scheme prefixes every reference in agent.toml.
const Scheme = "oci://"

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	tagRE    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	repoRE   = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
)

// ParseRef parses oci://REGISTRY/REPO[:TAG][@sha256:HEX].
func ParseRef(s string) (Ref, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Ref{}, fmt.Errorf("%w: %q does not start with %s", ErrBadRef, s, Scheme)
	}
	var r Ref
	if before, d, ok := strings.Cut(rest, "@"); ok {
		if !digestRE.MatchString(d) {
			return Ref{}, fmt.Errorf("%w: digest %q: want sha256: and 64 lowercase hex digits", ErrBadRef, d)
		}
		r.Digest, rest = d, before
	}
	host, path, ok := strings.Cut(rest, "/")
	if !ok || host == "" || path == "" {
		return Ref{}, fmt.Errorf("%w: %q: want %sREGISTRY/REPOSITORY:TAG or @sha256:DIGEST", ErrBadRef, s, Scheme)
	}
	if i := strings.LastIndex(path, ":"); i >= 0 {
		r.Tag, path = path[i+1:], path[:i]
		if !tagRE.MatchString(r.Tag) {
			return Ref{}, fmt.Errorf("%w: tag %q", ErrBadRef, r.Tag)
		}
	}
	if !repoRE.MatchString(path) {
		return Ref{}, fmt.Errorf("%w: repository %q: lowercase letters, digits and separators", ErrBadRef, path)
	}
	if strings.ContainsAny(host, "@?#\\ ") {
		return Ref{}, fmt.Errorf("%w: registry %q", ErrBadRef, host)
	}
	if r.Tag == "" && r.Digest == "" {
		return Ref{}, fmt.Errorf("%w: %q names neither a tag nor a digest", ErrBadRef, s)
	}
	r.Registry, r.Repository = host, path
	return r, nil
}

// Pinned reports whether r names a digest.
func (r Ref) Pinned() bool { return r.Digest != "" }

// String is the oci:// form: REGISTRY/REPO[:TAG][@DIGEST].
func (r Ref) String() string { return Scheme + r.name(true) }

// name is the reference in go-containerregistry's syntax; withTag false
// drops the tag of a pinned reference (go-containerregistry reads
// TAG@DIGEST as the digest alone anyway).
func (r Ref) name(withTag bool) string {
	s := r.Registry + "/" + r.Repository
	if r.Tag != "" && (withTag || r.Digest == "") {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Loopback reports whether the registry is on this machine (localhost or
// a loopback address): only then is plain HTTP used, as http-fetch allows
// plain HTTP only to loopback.
func (r Ref) Loopback() bool {
	host := r.Registry
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// StoreEnv overrides the store directory (DefaultStoreDir).
const StoreEnv = "MAIDEN_OCI_STORE"

// DefaultStoreDir is $MAIDEN_OCI_STORE, else the user cache directory's
// maiden/oci (beside the compiled-component cache), else "" (OpenStore
// refuses it): with neither $XDG_CACHE_HOME nor $HOME set it used to be
// the temporary directory's maiden/oci, a name every local user shares, so
// another could make it first and keep maiden from storing or loading any
// oci:// tool (the store refuses a directory someone else owns).
func DefaultStoreDir() string {
	if d := os.Getenv(StoreEnv); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "maiden", "oci")
}
