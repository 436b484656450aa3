package oci

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigsig "github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Cosign's signature layout: a manifest tagged sha256-HEX.sig in the
// image's repository, one layer per signature, each a simple-signing
// payload naming the signed manifest digest, with the base64 signature in
// an annotation.
const (
	cosignSigMediaType  = "application/vnd.dev.cosign.simplesigning.v1+json"
	cosignSigAnnotation = "dev.cosignproject.cosign/signature"
	// maxSignatures bounds the signatures read from one .sig manifest
	// (cosign appends one per signing key).
	maxSignatures = 16
)

// Key is a cosign-compatible public key (cosign.pub: a PEM public key,
// ECDSA P-256 as `cosign generate-key-pair` writes, RSA or Ed25519).
type Key struct {
	verifier sigsig.Verifier
	// bundles verifies Sigstore bundles signed with the key (what
	// `cosign sign --key --new-bundle-format` attaches, cosign v3's
	// default), with sigstore-go: the key is the only trusted material,
	// so a bundle carrying a certificate instead of the key's hint does
	// not verify, and no timestamp is required (a key, unlike a Fulcio
	// certificate, does not expire in minutes; the legacy layout asks for
	// none either).
	bundles *verify.Verifier
	// ID names the key in messages and the audit trail: "sha256:" and the
	// hex digest of its DER encoding, so two files holding one key agree.
	ID string
}

// ParseKey reads a PEM public key.
func ParseKey(pemBytes []byte) (*Key, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	v, err := sigsig.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	sum := sha256.Sum256(der)
	key := root.NewExpiringKey(v, time.Time{}, time.Time{})
	bv, err := verify.NewVerifier(root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		// The bundle's key hint is not trusted to pick a key: there is one.
		return key, nil
	}), verify.WithNoObserverTimestamps())
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return &Key{verifier: v, bundles: bv, ID: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// signature is one cosign signature as fetched: the payload and the
// base64 signature over it (cosign's .sig tag), or a Sigstore bundle
// signed with the key (an OCI referrer, cosign's new bundle format). It is
// stored beside the component so Load can verify it again offline.
type signature struct {
	Payload   []byte          `json:"payload,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Bundle    json.RawMessage `json:"bundle,omitempty"`
	// annotations are the layer's, as fetched (a keyless signature's
	// certificate and timestamp); not stored.
	annotations map[string]string
}

// signatureTag is where cosign puts the signatures of a manifest digest.
func signatureTag(digest string) string {
	return strings.Replace(digest, ":", "-", 1) + ".sig"
}

// fetchSignature fetches the signatures cosign attached to r's digest and
// returns them all as candidates; verify picks one the key accepts.
func fetchSignatures(ref name.Reference, r Ref, ro []remote.Option) ([]signature, error) {
	tag := ref.Context().Tag(signatureTag(r.Digest))
	desc, err := remote.Get(tag, ro...)
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: registry %s has no cosign signature for %s (tag %s)", ErrUnsigned, r.Registry, r.Digest, tag.TagStr())
	}
	if err != nil {
		return nil, fmt.Errorf("fetch signature: %w", err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("%w: signature manifest does not parse: %v", ErrBadSignature, err)
	}
	var all []signature
	for _, l := range m.Layers {
		if l.MediaType != cosignSigMediaType || l.Annotations[cosignSigAnnotation] == "" {
			continue
		}
		if len(all) == maxSignatures {
			// Each candidate is a download held until verification: a
			// manifest of thousands of layers naming one blob must not
			// cost thousands of them.
			break
		}
		if l.Size > maxSignatureBytes {
			return nil, fmt.Errorf("signature payload of %d bytes: %w", l.Size, ErrTooLarge)
		}
		b, err := fetchBlob(ref, l.Digest.String(), l.Size, ro)
		if err != nil {
			return nil, fmt.Errorf("signature payload: %w", err)
		}
		all = append(all, signature{Payload: b, Signature: l.Annotations[cosignSigAnnotation], annotations: l.Annotations})
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: the signature manifest for %s holds no cosign signature", ErrUnsigned, r.Digest)
	}
	return all, nil
}

// verify returns the first candidate that verifies with k and signs
// digest: cosign appends a layer per `cosign sign`, so a component signed
// by two keys has two, and one verifying is enough.
func (k *Key) verify(cands []signature, digest string) (signature, error) {
	var why []string
	for _, c := range cands {
		err := k.verifyOne(c, digest)
		if err == nil {
			return c, nil
		}
		why = append(why, err.Error())
	}
	if len(why) == 0 {
		return signature{}, fmt.Errorf("%w for %s", ErrUnsigned, digest)
	}
	return signature{}, fmt.Errorf("%w: %s", ErrBadSignature, strings.Join(why, "; "))
}

func (k *Key) verifyOne(c signature, digest string) error {
	if len(c.Bundle) > 0 {
		return k.verifyBundle(c.Bundle, digest)
	}
	raw, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil {
		return fmt.Errorf("signature is not base64: %v", err)
	}
	if err := k.verifier.VerifySignature(bytes.NewReader(raw), bytes.NewReader(c.Payload)); err != nil {
		return fmt.Errorf("not signed by key %s: %v", k.ID, err)
	}
	// Only now is the payload trusted enough to read.
	return checkSimpleSigning(c.Payload, digest)
}

// checkSimpleSigning checks that a verified simple-signing payload is a
// cosign signature of digest.
func checkSimpleSigning(raw []byte, digest string) error {
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("signed payload does not parse: %v", err)
	}
	if p.Critical.Type != payload.CosignSignatureType {
		return fmt.Errorf("signed payload has type %q, want %q", p.Critical.Type, payload.CosignSignatureType)
	}
	if !digestEqual(p.Critical.Image.DockerManifestDigest, digest) {
		return fmt.Errorf("the signature is over %s, not %s", p.Critical.Image.DockerManifestDigest, digest)
	}
	return nil
}

// bundleFor parses a Sigstore bundle and the digest it must be over
// (sha256:HEX), returning the digest's bytes.
func bundleFor(raw []byte, digest string) (*bundle.Bundle, []byte, error) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return nil, nil, fmt.Errorf("bundle does not parse: %v", err)
	}
	sum, err := hex.DecodeString(strings.TrimPrefix(digest, "sha256:"))
	if err != nil || !digestRE.MatchString(digest) {
		return nil, nil, fmt.Errorf("digest %q: want sha256: and 64 lowercase hex digits", digest)
	}
	return &b, sum, nil
}

// verifyBundle checks a Sigstore bundle signed with k (no certificate)
// over digest: a DSSE in-toto statement naming digest as its subject with
// cosign's signature predicate (what `cosign sign --new-bundle-format`
// signs), or a message signature over the manifest. A transparency-log
// entry or timestamp in the bundle is not required, as with the .sig tag.
func (k *Key) verifyBundle(raw []byte, digest string) error {
	b, sum, err := bundleFor(raw, digest)
	if err != nil {
		return err
	}
	res, err := k.bundles.Verify(b, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum), verify.WithKey()))
	if err != nil {
		return fmt.Errorf("bundle not signed by key %s over %s: %v", k.ID, digest, err)
	}
	if res.Statement != nil && res.Statement.GetPredicateType() != cosignSignPredicate {
		return fmt.Errorf("the bundle is an attestation of type %q, not a signature (%s)", res.Statement.GetPredicateType(), cosignSignPredicate)
	}
	return nil
}

// fetchKeySignatures returns the candidates for a key: the signatures in
// cosign's .sig tag and, unless one of those verifies with key already,
// the Sigstore bundles referring to the digest (cosign's new bundle
// format). It wraps ErrUnsigned when the registry holds neither.
func fetchKeySignatures(ref name.Reference, r Ref, ro []remote.Option, key *Key) ([]signature, error) {
	legacy, lerr := fetchSignatures(ref, r, ro)
	if lerr != nil && !errors.Is(lerr, ErrUnsigned) {
		return nil, lerr
	}
	if len(legacy) > 0 {
		if _, err := key.verify(legacy, r.Digest); err == nil {
			return legacy, nil
		}
	}
	bundles, berr := fetchBundles(ref, r, ro)
	switch {
	case berr == nil:
	case errors.Is(berr, ErrUnsigned) && lerr != nil:
		return nil, fmt.Errorf("%w; and no Sigstore bundle refers to it", lerr)
	case errors.Is(berr, ErrUnsigned) || len(legacy) > 0:
		// The .sig tag's candidates are refused with their reasons.
		return legacy, nil
	default:
		return nil, berr
	}
	for _, b := range bundles {
		legacy = append(legacy, signature{Bundle: b})
	}
	return legacy, nil
}

// digestEqual compares digests in constant time (STYLE 15).
func digestEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
