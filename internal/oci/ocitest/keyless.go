// Package ocitest makes Sigstore keyless signatures for tests: a
// throwaway trust root (sigstore-go's VirtualSigstore: a Fulcio-style CA,
// a Rekor-style log and a timestamp authority, all in memory), bundles
// signed by an identity it certifies, and the OCI referrer that attaches a
// bundle to a component in a registry, laid out as `cosign sign` (new
// bundle format) writes it. Only tests import it.
//
// The same root also holds a certificate authority and an RFC 3161
// timestamp authority whose keys this package keeps (own.go), for the
// cosign CLI to sign "keyless" offline: Certify issues a certificate for
// cosign's own key, TimestampAuthority serves timestamps on loopback.
//
//	ss := ocitest.NewSigstore(t)
//	os.WriteFile("trusted_root.json", ss.TrustedRoot(t), 0o600)
//	b := ss.Bundle(t, ocitest.Signing{Identity: "ci@acme.example", Issuer: "https://issuer.example", Digest: d})
//	ocitest.Attach(t, host, "acme/echo", d, b)
package ocitest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/signature"
	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
	"google.golang.org/protobuf/proto"
)

// BundleMediaType is the media type of the bundles Bundle makes, and of
// every referrer Attach writes (v0.3:
// the transparency-log entry carries an inclusion proof).
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// CosignSignPredicate is the predicate type of a cosign signature.
const CosignSignPredicate = "https://sigstore.dev/cosign/sign/v1"

// Sigstore is a throwaway trust root and the keys behind it.
type Sigstore struct {
	vs *ca.VirtualSigstore
	// own is a second certificate authority and timestamp authority of
	// the same root, whose keys this package holds (VirtualSigstore keeps
	// its own): certificates for a key made elsewhere, timestamps served
	// over HTTP (see own.go).
	own *ownAuthorities
}

// NewSigstore makes a new trust root.
func NewSigstore(t testing.TB) *Sigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	return &Sigstore{vs: vs, own: newOwnAuthorities(t)}
}

// TrustedRoot is the trust root as Sigstore's trusted_root.json.
func (s *Sigstore) TrustedRoot(t testing.TB) []byte {
	t.Helper()
	cas := append(s.vs.FulcioCertificateAuthorities(), s.own.ca)
	tsas := append(s.vs.TimestampingAuthorities(), s.own.tsa)
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, cas, rawLogIDs(t, s.vs.CTLogs()), tsas, rawLogIDs(t, s.vs.RekorLogs()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawLogIDs gives each log its ID as the bytes a trusted_root.json holds:
// VirtualSigstore keeps the hex digits (its in-memory lookups key on
// them), which would not survive the file.
func rawLogIDs(t testing.TB, logs map[string]*root.TransparencyLog) map[string]*root.TransparencyLog {
	t.Helper()
	out := map[string]*root.TransparencyLog{}
	for k, l := range logs {
		c := *l
		id, err := hex.DecodeString(string(l.ID))
		if err != nil {
			t.Fatal(err)
		}
		c.ID = id
		out[k] = &c
	}
	return out
}

// Signing says what Bundle signs and how.
type Signing struct {
	Identity, Issuer string // the certificate's subject alternative name (an email) and OIDC issuer
	Digest           string // the manifest digest the in-toto statement names ("sha256:HEX")
	// Predicate is the statement's predicate type; "" means a cosign
	// signature (CosignSignPredicate).
	Predicate string
	// Evidence is the trust root whose log and timestamp authority vouch
	// for the signing time; nil means the certificate's own (a CA outside
	// the trusted root is tested with the evidence still trusted).
	Evidence *Sigstore
	// NoTlog and NoTimestamp leave out the transparency-log entry and the
	// RFC 3161 timestamp.
	NoTlog, NoTimestamp bool
}

// Bundle signs an in-toto statement naming sg.Digest with a short-lived
// certificate s issues for sg.Identity and sg.Issuer, as a DSSE envelope
// (what cosign v3 signs an image with), and returns the bundle's JSON.
func (s *Sigstore) Bundle(t testing.TB, sg Signing) []byte {
	t.Helper()
	ev := sg.Evidence
	if ev == nil {
		ev = s
	}
	pred := sg.Predicate
	if pred == "" {
		pred = CosignSignPredicate
	}
	cert, priv, err := s.vs.GenerateLeafCert(sg.Identity, sg.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": "component", "digest": map[string]string{"sha256": strings.TrimPrefix(sg.Digest, "sha256:")}}},
		"predicateType": pred,
		"predicate":     map[string]any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	key := priv.(*ecdsa.PrivateKey)
	signer, err := signature.LoadECDSASigner(key, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dsse.NewEnvelopeSigner(&sigdsse.SignerAdapter{SignatureSigner: signer, Pub: &key.PublicKey})
	if err != nil {
		t.Fatal(err)
	}
	env, err := ds.SignPayload(context.Background(), "application/vnd.in-toto+json", stmt)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	vm := &protobundle.VerificationMaterial{
		Content: &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: cert.Raw}},
	}
	if !sg.NoTlog {
		// Integrated a minute after the certificate's NotBefore, within its
		// ten minutes.
		entry, err := ev.vs.GenerateTlogEntry(cert, env, sig, time.Now().Add(time.Minute).Unix(), true)
		if err != nil {
			t.Fatal(err)
		}
		// The entry as a bundle carries it: its kind, and the log's
		// signed promise over body, time, index and log ID (which
		// GenerateTlogEntry computes but does not expose).
		vm.TlogEntries = []*protorekor.TransparencyLogEntry{ev.asBundled(t, entry, "dsse")}
	}
	if !sg.NoTimestamp {
		ts, err := ev.vs.TimestampResponse(sig)
		if err != nil {
			t.Fatal(err)
		}
		vm.TimestampVerificationData = &protobundle.TimestampVerificationData{
			Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: ts}},
		}
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	pb := &protobundle.Bundle{
		MediaType:            BundleMediaType,
		VerificationMaterial: vm,
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload:     payload,
			PayloadType: env.PayloadType,
			Signatures:  []*protodsse.Signature{{Sig: sig, Keyid: env.Signatures[0].KeyID}},
		}},
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		t.Fatalf("bundle: %v", err)
	}
	out, err := b.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// asBundled is entry as a bundle carries it: its kind, and the log's
// signed promise over body, time, index and log ID (which VirtualSigstore
// computes but does not expose).
func (s *Sigstore) asBundled(t testing.TB, entry *tlog.Entry, kind string) *protorekor.TransparencyLogEntry {
	t.Helper()
	tle := proto.Clone(entry.TransparencyLogEntry()).(*protorekor.TransparencyLogEntry)
	tle.KindVersion = &protorekor.KindVersion{Kind: kind, Version: "0.0.1"}
	logID, err := s.vs.RekorLogID()
	if err != nil {
		t.Fatal(err)
	}
	set, err := s.vs.RekorSignPayload(tlog.RekorPayload{
		Body: base64.StdEncoding.EncodeToString(tle.CanonicalizedBody), IntegratedTime: tle.IntegratedTime,
		LogIndex: tle.LogIndex, LogID: logID,
	})
	if err != nil {
		t.Fatal(err)
	}
	tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
	return tle
}

// MessageBundle signs manifest itself (a message signature over its
// SHA-256, with a hashedrekord log entry and a timestamp, as a v0.1 bundle)
// with a certificate s issues for sg.Identity and sg.Issuer; sg's other
// fields are ignored.
func (s *Sigstore) MessageBundle(t testing.TB, sg Signing, manifest []byte) []byte {
	t.Helper()
	e, err := s.vs.Sign(sg.Identity, sg.Issuer, manifest)
	if err != nil {
		t.Fatal(err)
	}
	vc, err := e.VerificationContent()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := e.SignatureContent()
	if err != nil {
		t.Fatal(err)
	}
	ms := sc.MessageSignatureContent()
	entries, err := e.TlogEntries()
	if err != nil {
		t.Fatal(err)
	}
	tss, err := e.Timestamps()
	if err != nil {
		t.Fatal(err)
	}
	pb := &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle+json;version=0.1",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:     &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
			TlogEntries: []*protorekor.TransparencyLogEntry{s.asBundled(t, entries[0], "hashedrekord")},
			TimestampVerificationData: &protobundle.TimestampVerificationData{
				Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: tss[0]}},
			},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: ms.Digest()},
			Signature:     ms.Signature(),
		}},
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		t.Fatalf("bundle: %v", err)
	}
	out, err := b.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// referrer is an OCI 1.1 image manifest with artifactType, which
// go-containerregistry's v1.Manifest lacks.
type referrer struct {
	v1.Manifest
	ArtifactType string `json:"artifactType"`
}

type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// Attach pushes bundle as a referrer of the manifest digest in
// host/repo (a loopback registry): an empty config, artifactType and one
// layer of the bundle media type, and the component's manifest as its
// subject, as `cosign sign` lays it out.
func Attach(t testing.TB, host, repo, digest string, bundleJSON []byte) {
	t.Helper()
	r, err := name.ParseReference(host+"/"+repo+"@"+digest, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := remote.Head(r)
	if err != nil {
		t.Fatal(err)
	}
	cfg := static.NewLayer([]byte("{}"), "application/vnd.oci.empty.v1+json")
	layer := static.NewLayer(bundleJSON, BundleMediaType)
	var descs []v1.Descriptor
	for _, l := range []v1.Layer{cfg, layer} {
		if err := remote.WriteLayer(r.Context(), l); err != nil {
			t.Fatal(err)
		}
		d, _ := l.Digest()
		n, _ := l.Size()
		mt, _ := l.MediaType()
		descs = append(descs, v1.Descriptor{MediaType: mt, Digest: d, Size: n})
	}
	m, err := json.Marshal(referrer{Manifest: v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        descs[0],
		Layers:        descs[1:],
		Subject:       &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
	}, ArtifactType: BundleMediaType})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(m)
	if err := remote.Put(r.Context().Digest("sha256:"+hex.EncodeToString(sum[:])), rawManifest(m)); err != nil {
		t.Fatal(err)
	}
}

// Tamper returns bundleJSON with one byte of its DSSE signature flipped.
func Tamper(t testing.TB, bundleJSON []byte) []byte {
	t.Helper()
	var b bundle.Bundle
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		t.Fatal(err)
	}
	env := b.GetDsseEnvelope()
	if env == nil || len(env.Signatures) == 0 {
		t.Fatal(fmt.Errorf("tamper: not a DSSE bundle"))
	}
	env.Signatures[0].Sig = bytes.Clone(env.Signatures[0].Sig)
	env.Signatures[0].Sig[len(env.Signatures[0].Sig)/2] ^= 1
	out, err := b.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
