package oci

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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
)

// Key is a cosign-compatible public key (cosign.pub: a PEM public key,
// ECDSA P-256 as `cosign generate-key-pair` writes, RSA or Ed25519).
type Key struct {
	verifier sigsig.Verifier
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
	return &Key{verifier: v, ID: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// signature is one cosign signature as fetched: the payload and the
// base64 signature over it. It is stored beside the component so Load can
// verify it again offline.
type signature struct {
	Payload   []byte `json:"payload"`
	Signature string `json:"signature"`
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
		if l.Size > maxSignatureBytes {
			return nil, fmt.Errorf("signature payload of %d bytes: %w", l.Size, ErrTooLarge)
		}
		b, err := fetchBlob(ref, l.Digest.String(), l.Size, ro)
		if err != nil {
			return nil, fmt.Errorf("signature payload: %w", err)
		}
		all = append(all, signature{Payload: b, Signature: l.Annotations[cosignSigAnnotation]})
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
	raw, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil {
		return fmt.Errorf("signature is not base64: %v", err)
	}
	if err := k.verifier.VerifySignature(bytes.NewReader(raw), bytes.NewReader(c.Payload)); err != nil {
		return fmt.Errorf("not signed by key %s: %v", k.ID, err)
	}
	// Only now is the payload trusted enough to read.
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(c.Payload, &p); err != nil {
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

// digestEqual compares digests in constant time (STYLE 15).
func digestEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
