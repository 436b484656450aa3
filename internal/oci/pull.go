package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/maiden-run/maiden/internal/capread"
)

// PullOptions configure Resolve and Pull. nil means defaults.
type PullOptions struct {
	// Key is the public key a signature must verify with (see LoadKey);
	// nil means no signature is fetched or required.
	Key *Key
	// Keyless is the keyless policy a Sigstore bundle referring to the
	// manifest must satisfy; nil means none is fetched or required. At
	// most one of Key and Keyless may be set.
	Keyless *Keyless
	// Keychain supplies registry credentials; nil means
	// go-containerregistry's default (docker config.json and credential
	// helpers, anonymous otherwise).
	Keychain authn.Keychain
	// Transport supplies the TLS settings and timeouts of the HTTP
	// transport (a test's certificate authority); nil means
	// http.DefaultTransport's. Its Proxy, DialContext and DialTLSContext
	// are replaced: connections are made by the address rule's dialer
	// (net.go), requests pass the size caps, the plain-HTTP rule and the
	// redirect rules.
	Transport *http.Transport
	// Timeout bounds each Resolve, Pull, Push and Sign as a whole (every
	// request and body); zero means DefaultTimeout. When it passes, the
	// error is a *DeadlineError naming the registry, the stage and the
	// artifact.
	Timeout time.Duration
	// Resolver resolves the hosts a registry sends maiden to, whose
	// addresses are checked before they are dialled; nil means
	// net.DefaultResolver.
	Resolver Resolver

	// dial connects to an address the guard checked (tests: a registry
	// that resolves to a public address is served on loopback); nil means
	// a net.Dialer.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// remote is go-containerregistry's options for one operation against the
// registry of r; done releases the transport's connections.
func (o *PullOptions) remote(ctx context.Context, r Ref) (ro []remote.Option, done func()) {
	var kc authn.Keychain
	if o != nil {
		kc = o.Keychain
	}
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	base, _ := o.transport(registryHost(r.Registry))
	sk, _ := kc.(secretKeychain)
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(kc),
		remote.WithTransport(capTransport{base: base, registry: registryHost(r.Registry), loopback: r.Loopback(), login: sk.login, redact: sk.redact}),
		// One attempt: a registry that is down is reported at once, naming
		// it, rather than after a backoff.
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
	}, base.CloseIdleConnections
}

// parsed is r in go-containerregistry's form. name.Insecure only permits
// plain HTTP; capTransport refuses it for anything but loopback.
func (r Ref) parsed() (name.Reference, error) {
	var opts []name.Option
	if r.Loopback() {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(r.name(false), opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRef, err)
	}
	return ref, nil
}

// Resolve returns r pinned to the digest the registry serves for its tag
// now (a pinned r keeps its tag and gets the tag's current digest). Only
// the manifest's descriptor is fetched.
func Resolve(ctx context.Context, r Ref, opts *PullOptions) (Ref, error) {
	if r.Tag == "" {
		return r, nil
	}
	ctx, cancel, d := opts.withDeadline(ctx)
	defer cancel()
	ro, done := opts.remote(ctx, r)
	defer done()
	return resolve(ctx, d, r, ro)
}

// resolve is Resolve under a deadline d already set on ctx.
func resolve(ctx context.Context, d time.Duration, r Ref, ro []remote.Option) (Ref, error) {
	r.Digest = ""
	ref, err := r.parsed()
	if err != nil {
		return Ref{}, err
	}
	desc, err := remote.Head(ref, ro...)
	if err != nil {
		if late := overdue(ctx, err, d, r.Registry, StageManifest, "tag "+r.Tag); errors.Is(late, ErrDeadline) {
			return Ref{}, fmt.Errorf("resolve %s: %w", r, late)
		}
		return Ref{}, fmt.Errorf("resolve %s at registry %s: %w", r, r.Registry, err)
	}
	if desc.Size > MaxManifestBytes {
		return Ref{}, fmt.Errorf("resolve %s: manifest of %d bytes: %w (%d bytes)", r, desc.Size, ErrTooLarge, MaxManifestBytes)
	}
	pinned := r
	pinned.Digest = desc.Digest.String()
	return pinned, nil
}

// Pull fetches the pinned component r into st: the manifest (verified
// against r's digest), the component layer (verified against the
// manifest), and with opts.Key the signature (verified against the key
// and r's digest), with opts.Keyless a Sigstore bundle (verified against
// the policy's trusted root, identity and issuer, and r's digest). Nothing is stored unless everything verified; the
// result is what Store.Load returns for it. The whole pull is bounded by
// opts.Timeout (DefaultTimeout).
func Pull(ctx context.Context, r Ref, st *Store, opts *PullOptions) (Component, error) {
	if !r.Pinned() {
		return Component{}, fmt.Errorf("pull %s: %w", r, ErrNotPinned)
	}
	ref, err := r.parsed()
	if err != nil {
		return Component{}, err
	}
	ctx, cancel, d := opts.withDeadline(ctx)
	defer cancel()
	ro, done := opts.remote(ctx, r)
	defer done()
	// late is err, or the DeadlineError of stage when the deadline ended it.
	late := func(err error, stage, artifact string) error {
		return overdue(ctx, err, d, r.Registry, stage, artifact)
	}
	if r.Tag != "" {
		now, err := resolve(ctx, d, r, ro)
		if err != nil {
			return Component{}, fmt.Errorf("pull %s: %w", r, err)
		}
		if !digestEqual(now.Digest, r.Digest) {
			return Component{}, fmt.Errorf("pull %s: %w: tag %s now names %s; review it and pin it with maiden add %s", r, ErrTagMoved, r.Tag, now.Digest, Ref{Registry: r.Registry, Repository: r.Repository, Tag: r.Tag})
		}
	}
	desc, err := remote.Get(ref, ro...)
	if err != nil {
		if err := late(err, StageManifest, r.Digest); errors.Is(err, ErrDeadline) {
			return Component{}, fmt.Errorf("pull %s: %w", r, err)
		}
		return Component{}, fmt.Errorf("pull %s from registry %s: %w", r, r.Registry, classify(err))
	}
	manifest := desc.Manifest
	if err := checkDigest(manifest, r.Digest); err != nil {
		return Component{}, fmt.Errorf("pull %s: manifest: %w", r, err)
	}
	layer, err := componentLayer(manifest)
	if err != nil {
		return Component{}, fmt.Errorf("pull %s: %w", r, err)
	}
	var key *Key
	var kl *Keyless
	if opts != nil {
		key, kl = opts.Key, opts.Keyless
	}
	if key != nil && kl != nil {
		return Component{}, fmt.Errorf("pull %s: both a key and a keyless policy given; want one", r)
	}
	// Signatures are verified before the layer is downloaded: an unsigned
	// or foreign component costs a few small requests.
	var evidence []byte
	var evidenceFile string
	switch {
	case key != nil:
		cands, err := fetchKeySignatures(ref, r, ro, key)
		if err != nil {
			return Component{}, fmt.Errorf("pull %s: %w", r, late(err, StageSignature, "of "+r.Digest))
		}
		good, err := key.verify(cands, r.Digest)
		if err != nil {
			return Component{}, fmt.Errorf("pull %s: %w", r, late(err, StageSignature, "of "+r.Digest))
		}
		if evidence, err = json.Marshal(good); err != nil {
			return Component{}, err
		}
		evidenceFile = st.sigFile(r.Digest, key)
	case kl != nil:
		cands, err := fetchKeylessCandidates(ref, r, ro, kl)
		if err != nil {
			return Component{}, fmt.Errorf("pull %s: %w", r, late(err, StageSignature, "of "+r.Digest))
		}
		if evidence, err = kl.verify(cands, r.Digest); err != nil {
			return Component{}, fmt.Errorf("pull %s: %w", r, late(err, StageSignature, "of "+r.Digest))
		}
		evidenceFile = st.bundleFile(r.Digest, kl.ID)
	}
	body, err := fetchBlob(ref, layer.Digest.String(), layer.Size, ro)
	if err != nil {
		if err := late(err, StageBlob, layer.Digest.String()); errors.Is(err, ErrDeadline) {
			return Component{}, fmt.Errorf("pull %s: %w", r, err)
		}
		return Component{}, fmt.Errorf("pull %s: component layer: %w", r, err)
	}
	if err := checkComponent(body); err != nil {
		return Component{}, fmt.Errorf("pull %s: %w", r, err)
	}
	if err := st.put(manifest, body, evidence, evidenceFile, r.Digest); err != nil {
		return Component{}, fmt.Errorf("pull %s: %w", r, err)
	}
	if kl != nil {
		return st.LoadKeyless(r, kl)
	}
	return st.Load(r, key)
}

// fetchBlob downloads one blob of the declared size (at most
// MaxLayerBytes) and checks its digest.
func fetchBlob(repo name.Reference, digest string, size int64, ro []remote.Option) ([]byte, error) {
	if size < 0 || size > MaxLayerBytes {
		return nil, fmt.Errorf("declares %d bytes: %w (%d bytes)", size, ErrTooLarge, int64(MaxLayerBytes))
	}
	l, err := remote.Layer(repo.Context().Digest(digest), ro...)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, size+1))
	if err != nil {
		return nil, classify(err)
	}
	if int64(len(b)) != size {
		return nil, fmt.Errorf("%w: %d bytes served, the manifest says %d", ErrDigestMismatch, len(b), size)
	}
	if err := checkDigest(b, digest); err != nil {
		return nil, err
	}
	return b, nil
}

// componentLayer checks that a manifest is one WebAssembly component (an
// OCI image manifest with one application/wasm layer) and returns that
// layer.
func componentLayer(raw []byte) (v1.Descriptor, error) {
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("%w: manifest does not parse: %v", ErrNotComponent, err)
	}
	switch m.MediaType {
	case types.OCIManifestSchema1, "":
	case types.OCIImageIndex, types.DockerManifestList:
		return v1.Descriptor{}, fmt.Errorf("%w: %s is an index of several manifests, not one component", ErrNotComponent, m.MediaType)
	default:
		return v1.Descriptor{}, fmt.Errorf("%w: manifest media type %s", ErrNotComponent, m.MediaType)
	}
	if m.Config.MediaType != ConfigMediaType {
		return v1.Descriptor{}, fmt.Errorf("%w: config media type %q, want %s", ErrNotComponent, m.Config.MediaType, ConfigMediaType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != LayerMediaType {
		got := make([]string, len(m.Layers))
		for i, l := range m.Layers {
			got[i] = string(l.MediaType)
		}
		return v1.Descriptor{}, fmt.Errorf("%w: layers [%s], want one %s", ErrNotComponent, strings.Join(got, ", "), LayerMediaType)
	}
	return m.Layers[0], nil
}

// componentMagic starts every WebAssembly component binary: \0asm, then
// the component-model layer's version (0x0d) and layer (1).
var componentMagic = []byte{0x00, 'a', 's', 'm', 0x0d, 0x00, 0x01, 0x00}

func checkComponent(b []byte) error {
	if !bytes.HasPrefix(b, componentMagic) {
		return fmt.Errorf("%w: the layer is not a WebAssembly component binary", ErrNotComponent)
	}
	return nil
}

// checkDigest compares b's SHA-256 with want ("sha256:HEX").
func checkDigest(b []byte, want string) error {
	sum := sha256.Sum256(b)
	got := "sha256:" + hex.EncodeToString(sum[:])
	if !digestEqual(got, want) {
		return fmt.Errorf("%w: got %s, want %s", ErrDigestMismatch, got, want)
	}
	return nil
}

// capTransport enforces the size caps on what a registry sends, the
// plain-HTTP rule, the redirect rules (checkRedirect) and where a secret's
// login may go (checkLogin) on every request
// go-containerregistry makes (the registry, its token service, a blob
// redirect).
type capTransport struct {
	base     http.RoundTripper
	registry string // host[:port] as go-containerregistry names it
	loopback bool   // the registry is on loopback
	login    bool   // a maiden secret's USER:PASSWORD logs in (checkLogin)
	// redact, with a maiden secret's credential, hides it in the body of
	// an error answer (redactError).
	redact func(string) string
}

func (t capTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !(Ref{Registry: req.URL.Host}).Loopback() {
		return nil, fmt.Errorf("plain %s to %s refused: only a loopback registry may be reached without TLS", req.URL.Scheme, req.URL.Host)
	}
	req, err := t.checkRedirect(req)
	if err != nil {
		return nil, err
	}
	if err := t.checkLogin(req); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && t.redact != nil && resp.StatusCode >= 400 {
		return t.redactError(req, resp)
	}
	if err != nil || req.Method != http.MethodGet {
		return resp, err
	}
	limit := int64(MaxManifestBytes) // manifests, tokens, errors
	if blobRequest(req) {
		limit = MaxLayerBytes
	}
	if resp.ContentLength > limit {
		resp.Body.Close()
		return nil, fmt.Errorf("%s declares %d bytes: %w (%d bytes)", req.URL.Path, resp.ContentLength, ErrTooLarge, limit)
	}
	resp.Body = capread.New(resp.Body, limit, fmt.Errorf("response body: %w", ErrTooLarge))
	return resp, nil
}

// redactError replaces the body of an error answer (at most
// MaxManifestBytes of it) with its text redacted of the secret's
// credential: go-containerregistry quotes the body in its error
// (transport.Error: the registry's messages, or the raw body), which
// maiden pull, add and publish print, and a registry or token service
// may echo the Authorization header it refused.
func (t capTransport) redactError(req *http.Request, resp *http.Response) (*http.Response, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifestBytes))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("%s answered %s and its body could not be read: %w", req.URL.Redacted(), resp.Status, err)
	}
	red := t.redact(string(body))
	resp.Body = io.NopCloser(strings.NewReader(red))
	resp.ContentLength = int64(len(red))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// blobRequest reports whether req fetches a blob: the request that began
// its redirect chain is GET /v2/NAME/blobs/DIGEST. A redirect keeps the
// cap of the request that began the chain, so a manifest sent off /v2/
// is still capped as a manifest, and a repository named .../blobs/...
// does not make its manifests blobs. A redirect whose chain cannot be
// followed back (a transport that does not set Response.Request) is
// taken as a blob's redirect to storage elsewhere when it leaves /v2/.
func blobRequest(req *http.Request) bool {
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	if first.Response != nil {
		return !strings.HasPrefix(req.URL.Path, "/v2/")
	}
	p := first.URL.Path
	return strings.HasPrefix(p, "/v2/") && path.Base(path.Dir(p)) == "blobs"
}

// classify gives go-containerregistry's own digest checks (which run
// before ours and return unexported error types) the sentinel our callers
// test for: the registry served bytes other than those the digest names.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrDigestMismatch) {
		return err
	}
	msg := err.Error()
	if strings.Contains(msg, "does not match requested digest") || strings.Contains(msg, "error verifying") {
		return fmt.Errorf("%w: %v", ErrDigestMismatch, err)
	}
	return err
}

// isNotFound reports a registry's 404 (no such manifest).
func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}
