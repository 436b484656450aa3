package oci

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-openapi/runtime"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/types"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Sigstore bundles attached as OCI referrers: the layout `cosign sign`
// writes with the new bundle format (cosign v3's default): a manifest whose
// subject is the signed image manifest, artifactType the bundle media type,
// and one layer holding the bundle's JSON.
const (
	bundleMediaTypePrefix = "application/vnd.dev.sigstore.bundle"
	// bundleMediaTypeV03 is the version of the bundles transcribed from
	// cosign's .sig tag (a certificate, not a chain), v0.1 when they carry
	// a log entry (its promise, without an inclusion proof).
	bundleMediaTypeV03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
	bundleMediaTypeV01 = "application/vnd.dev.sigstore.bundle+json;version=0.1"
	// emptyArtifactType is the config media type of such a manifest: a
	// registry that does not index artifactType reports it instead.
	emptyArtifactType = "application/vnd.oci.empty.v1+json"
	// cosignSignPredicate is the in-toto predicate type of a cosign
	// signature in a DSSE bundle; any other predicate (an SBOM, a SLSA
	// provenance attestation) over the digest is an attestation, not a
	// signature, and is not accepted as one.
	cosignSignPredicate = "https://sigstore.dev/cosign/sign/v1"
	// maxBundles bounds the referrers read for one digest, and the
	// bundles read from all of them.
	maxBundles = 16
)

// Keyless is a Sigstore keyless signing policy: a bundle whose Fulcio
// certificate chains to a certificate authority of the trusted root, names
// Identity as its subject alternative name and Issuer as its OIDC issuer,
// signs the manifest digest, and carries evidence of when it signed
// (a transparency-log entry, or with TransparencyLog false a signed
// timestamp) that verifies against the trusted root. Everything is checked
// offline: the trusted root is a file (Sigstore's trusted_root.json), never
// fetched.
type Keyless struct {
	Issuer   string // exact OIDC issuer, e.g. https://token.actions.githubusercontent.com
	Identity string // exact certificate subject alternative name (an email or a URI)
	// TransparencyLog requires a Rekor entry (its inclusion promise or
	// proof verified against the trusted root's log keys). Without it, a
	// signed RFC 3161 timestamp from a timestamp authority of the trusted
	// root must vouch for the time of signing instead: a Fulcio
	// certificate lives ten minutes, so some trusted time is always needed.
	TransparencyLog bool
	// ID names the signer in messages and the audit trail:
	// "keyless:ISSUER IDENTITY".
	ID string

	verifier *verify.Verifier
	policy   verify.CertificateIdentity
}

// NewKeyless reads a trusted root (trusted_root.json) and makes the policy
// that a bundle be signed by identity as issuer vouched.
func NewKeyless(trustedRoot []byte, issuer, identity string, transparencyLog bool) (*Keyless, error) {
	if issuer == "" || identity == "" || strings.ContainsAny(issuer+identity, " \t\r\n") {
		return nil, fmt.Errorf("keyless: issuer and identity must be non-empty and without spaces, got %q and %q", issuer, identity)
	}
	tr, err := root.NewTrustedRootFromJSON(trustedRoot)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return nil, errors.New("trusted root: no certificate authority")
	}
	opts := []verify.VerifierOption{verify.WithObserverTimestamps(1)}
	if transparencyLog {
		if len(tr.RekorLogs()) == 0 {
			return nil, errors.New("trusted root: no transparency log, and transparency_log is required")
		}
		opts = append(opts, verify.WithTransparencyLog(1))
	} else if len(tr.TimestampingAuthorities()) == 0 {
		return nil, errors.New("trusted root: no timestamp authority, and without transparency_log a signed timestamp is required")
	}
	v, err := verify.NewVerifier(tr, opts...)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	id, err := verify.NewShortCertificateIdentity(issuer, "", identity, "")
	if err != nil {
		return nil, fmt.Errorf("keyless: %w", err)
	}
	return &Keyless{
		Issuer: issuer, Identity: identity, TransparencyLog: transparencyLog,
		ID:       KeylessID(issuer, identity),
		verifier: v, policy: id,
	}, nil
}

// KeylessID is the signer a keyless signature by identity as issuer
// vouched is recorded as.
func KeylessID(issuer, identity string) string {
	return "keyless:" + issuer + " " + identity
}

// verify returns the first bundle that verifies for digest: several may
// refer to one manifest (signatures by others, attestations).
func (k *Keyless) verify(cands [][]byte, digest string) ([]byte, error) {
	var why []string
	for _, c := range cands {
		err := k.verifyOne(c, digest)
		if err == nil {
			return c, nil
		}
		why = append(why, err.Error())
	}
	if len(why) == 0 {
		return nil, fmt.Errorf("%w for %s", ErrUnsigned, digest)
	}
	return nil, fmt.Errorf("%w: %s", ErrBadSignature, strings.Join(why, "; "))
}

// verifyOne checks one bundle's JSON with sigstore-go: the certificate's
// chain to the trusted root at the verified time of signing, the
// transparency-log entry or timestamp, the identity and issuer, and the
// signature over digest (a message signature over the manifest, or a DSSE
// in-toto statement naming it as its subject).
func (k *Keyless) verifyOne(raw []byte, digest string) error {
	var ev sigTagEvidence
	if json.Unmarshal(raw, &ev) == nil && len(ev.Payload) > 0 && len(ev.Bundle) > 0 {
		return k.verifySigTag(ev, digest)
	}
	b, sum, err := bundleFor(raw, digest)
	if err != nil {
		return err
	}
	res, err := k.verifier.Verify(b, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum), verify.WithCertificateIdentity(k.policy)))
	if err != nil {
		return fmt.Errorf("not signed by %s: %v", k.ID, err)
	}
	if res.Signature == nil || res.Signature.Certificate == nil {
		return fmt.Errorf("not signed by %s: the bundle is not signed with a certificate", k.ID)
	}
	if res.Statement != nil && res.Statement.GetPredicateType() != cosignSignPredicate {
		return fmt.Errorf("the bundle is an attestation of type %q, not a signature (%s)", res.Statement.GetPredicateType(), cosignSignPredicate)
	}
	return nil
}

// sigTagEvidence is a keyless signature from cosign's .sig tag, as
// verified and stored: the simple-signing payload, and a Sigstore bundle
// whose message signature covers it, transcribed from the layer's
// annotations (sigTagBundle). A bundle from a referrer is stored as it is.
type sigTagEvidence struct {
	Payload []byte          `json:"payload"`
	Bundle  json.RawMessage `json:"bundle"`
}

// verifySigTag checks a .sig tag's keyless signature: sigstore-go verifies
// the bundle over the payload's bytes (certificate, identity, signing
// time), then the payload must be a cosign signature of digest.
func (k *Keyless) verifySigTag(ev sigTagEvidence, digest string) error {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(ev.Bundle); err != nil {
		return fmt.Errorf("bundle does not parse: %v", err)
	}
	res, err := k.verifier.Verify(&b, verify.NewPolicy(verify.WithArtifact(bytes.NewReader(ev.Payload)), verify.WithCertificateIdentity(k.policy)))
	if err != nil {
		return fmt.Errorf("not signed by %s: %v", k.ID, err)
	}
	if res.Signature == nil || res.Signature.Certificate == nil {
		return fmt.Errorf("not signed by %s: the signature has no certificate", k.ID)
	}
	return checkSimpleSigning(ev.Payload, digest)
}

// Annotations of a keyless signature in cosign's .sig tag layout (cosign
// sign with a certificate and without --new-bundle-format).
const (
	cosignCertAnnotation      = "dev.sigstore.cosign/certificate"
	cosignTimestampAnnotation = "dev.sigstore.cosign/rfc3161timestamp"
	cosignRekorAnnotation     = "dev.sigstore.cosign/bundle"
)

// sigTagBundle transcribes a .sig tag signature that carries a
// certificate into a Sigstore bundle (v0.3, the protobuf-specs types) for
// sigstore-go to verify: the certificate (the trusted root supplies its
// chain; the chain annotation is not trusted), the message signature over
// the payload, and the RFC 3161 timestamp cosign fetched over the
// signature. It returns the stored form (sigTagEvidence's JSON).
func sigTagBundle(c signature) ([]byte, error) {
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(c.annotations[cosignCertAnnotation]))
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("the certificate annotation does not parse: %v", err)
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil {
		return nil, fmt.Errorf("signature is not base64: %v", err)
	}
	vm := &protobundle.VerificationMaterial{
		Content: &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: certs[0].Raw}},
	}
	if ts := c.annotations[cosignTimestampAnnotation]; ts != "" {
		var t struct{ SignedRFC3161Timestamp []byte }
		if err := json.Unmarshal([]byte(ts), &t); err != nil || len(t.SignedRFC3161Timestamp) == 0 {
			return nil, fmt.Errorf("the RFC 3161 timestamp annotation does not parse: %v", err)
		}
		vm.TimestampVerificationData = &protobundle.TimestampVerificationData{
			Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: t.SignedRFC3161Timestamp}},
		}
	}
	mediaType := bundleMediaTypeV03
	if rb := c.annotations[cosignRekorAnnotation]; rb != "" {
		tle, err := sigTagLogEntry(rb)
		if err != nil {
			return nil, fmt.Errorf("the Rekor annotation %s: %v", cosignRekorAnnotation, err)
		}
		vm.TlogEntries = []*protorekor.TransparencyLogEntry{tle}
		// The annotation holds the log's promise (a signed entry
		// timestamp), not an inclusion proof: a v0.1 bundle's evidence.
		mediaType = bundleMediaTypeV01
	}
	sum := sha256.Sum256(c.Payload)
	pb := &protobundle.Bundle{
		MediaType:            mediaType,
		VerificationMaterial: vm,
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]},
			Signature:     sig,
		}},
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		return nil, fmt.Errorf("bundle: %v", err)
	}
	raw, err := b.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return json.Marshal(sigTagEvidence{Payload: c.Payload, Bundle: raw})
}

// sigTagLogEntry transcribes cosign's Rekor annotation (the log's signed
// entry timestamp over the entry's body, integrated time, index and log
// ID, sigstore-go's tlog.RekorPayload) into a bundle's log entry with that
// inclusion promise; the kind and version are the body's, as Rekor's own
// types read it. sigstore-go verifies the promise against the trusted
// root's log keys and the body against the signature and certificate.
func sigTagLogEntry(annotation string) (*protorekor.TransparencyLogEntry, error) {
	var rb struct {
		SignedEntryTimestamp []byte
		Payload              tlog.RekorPayload
	}
	if err := json.Unmarshal([]byte(annotation), &rb); err != nil {
		return nil, fmt.Errorf("does not parse: %v", err)
	}
	b64, _ := rb.Payload.Body.(string)
	body, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(body) == 0 || len(rb.SignedEntryTimestamp) == 0 {
		return nil, errors.New("want a base64 body and a signed entry timestamp")
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return nil, fmt.Errorf("log ID: %v", err)
	}
	pe, err := models.UnmarshalProposedEntry(bytes.NewReader(body), runtime.JSONConsumer())
	if err != nil {
		return nil, fmt.Errorf("body: %v", err)
	}
	impl, err := types.UnmarshalEntry(pe)
	if err != nil {
		return nil, fmt.Errorf("body: %v", err)
	}
	return &protorekor.TransparencyLogEntry{
		LogIndex:          rb.Payload.LogIndex,
		LogId:             &protocommon.LogId{KeyId: logID},
		KindVersion:       &protorekor.KindVersion{Kind: pe.Kind(), Version: impl.APIVersion()},
		IntegratedTime:    rb.Payload.IntegratedTime,
		InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: rb.SignedEntryTimestamp},
		CanonicalizedBody: body,
	}, nil
}

// fetchKeylessCandidates returns the candidates for a keyless policy: the
// Sigstore bundles referring to the digest and, unless one of those
// verifies already, the signatures in cosign's .sig tag that carry a
// certificate, transcribed (sigTagBundle). It wraps ErrUnsigned when the
// registry holds neither.
func fetchKeylessCandidates(ref name.Reference, r Ref, ro []remote.Option, kl *Keyless) ([][]byte, error) {
	bundles, berr := fetchBundles(ref, r, ro)
	if berr != nil && !errors.Is(berr, ErrUnsigned) {
		return nil, berr
	}
	if len(bundles) > 0 {
		if _, err := kl.verify(bundles, r.Digest); err == nil {
			return bundles, nil
		}
	}
	sigs, serr := fetchSignatures(ref, r, ro)
	if serr != nil && !errors.Is(serr, ErrUnsigned) {
		if len(bundles) > 0 {
			return bundles, nil
		}
		return nil, serr
	}
	var why []string
	for _, s := range sigs {
		if s.annotations[cosignCertAnnotation] == "" {
			continue // signed with a key alone
		}
		ev, err := sigTagBundle(s)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		bundles = append(bundles, ev)
	}
	if len(bundles) == 0 {
		if len(why) > 0 {
			return nil, fmt.Errorf("%w: %s", ErrBadSignature, strings.Join(why, "; "))
		}
		return nil, fmt.Errorf("%w: registry %s has no Sigstore bundle referring to %s, and no signature with a certificate in tag %s", ErrUnsigned, r.Registry, r.Digest, signatureTag(r.Digest))
	}
	return bundles, nil
}

// bundleReferrer reports whether a referrer may hold a Sigstore bundle.
func bundleReferrer(d v1.Descriptor) bool {
	return strings.HasPrefix(d.ArtifactType, bundleMediaTypePrefix) || d.ArtifactType == emptyArtifactType
}

// fetchBundles fetches the Sigstore bundles that refer to r's digest (the
// OCI referrers API, or its tag-schema fallback) and returns them as
// candidates; verify picks one the policy accepts.
func fetchBundles(ref name.Reference, r Ref, ro []remote.Option) ([][]byte, error) {
	d := ref.Context().Digest(r.Digest)
	idx, err := remote.Referrers(d, ro...)
	if err != nil {
		return nil, fmt.Errorf("fetch referrers: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%w: referrers index does not parse: %v", ErrBadSignature, err)
	}
	var all [][]byte
	seen := 0
	for _, desc := range im.Manifests {
		if !bundleReferrer(desc) {
			continue
		}
		if seen++; seen > maxBundles {
			break
		}
		if desc.Size > MaxManifestBytes {
			return nil, fmt.Errorf("bundle manifest of %d bytes: %w", desc.Size, ErrTooLarge)
		}
		got, err := remote.Get(ref.Context().Digest(desc.Digest.String()), ro...)
		if err != nil {
			return nil, fmt.Errorf("fetch bundle manifest: %w", classify(err))
		}
		if err := checkDigest(got.Manifest, desc.Digest.String()); err != nil {
			return nil, fmt.Errorf("bundle manifest: %w", err)
		}
		m, err := v1.ParseManifest(bytes.NewReader(got.Manifest))
		if err != nil {
			return nil, fmt.Errorf("%w: bundle manifest does not parse: %v", ErrBadSignature, err)
		}
		for _, l := range m.Layers {
			if !strings.HasPrefix(string(l.MediaType), bundleMediaTypePrefix) {
				continue
			}
			if len(all) == maxBundles {
				break // each a download held until verification
			}
			if l.Size > maxSignatureBytes {
				return nil, fmt.Errorf("bundle of %d bytes: %w", l.Size, ErrTooLarge)
			}
			b, err := fetchBlob(ref, l.Digest.String(), l.Size, ro)
			if err != nil {
				return nil, fmt.Errorf("bundle: %w", err)
			}
			all = append(all, b)
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: registry %s has no Sigstore bundle referring to %s", ErrUnsigned, r.Registry, r.Digest)
	}
	return all, nil
}
