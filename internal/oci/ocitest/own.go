package ocitest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/digitorus/timestamp"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
)

// ownAuthorities is a Fulcio-style certificate authority and an RFC 3161
// timestamp authority made with sigstore-go's test helpers, for what
// VirtualSigstore cannot do with its private keys: certify a public key
// made elsewhere (the cosign CLI's), and timestamp over HTTP (cosign sign
// --timestamp-server-url).
type ownAuthorities struct {
	ca     *root.FulcioCertificateAuthority
	caKey  *ecdsa.PrivateKey
	tsa    *root.SigstoreTimestampingAuthority
	tsaKey *ecdsa.PrivateKey
}

func newOwnAuthorities(t testing.TB) *ownAuthorities {
	t.Helper()
	caRoot, caRootKey, err := ca.GenerateRootCa()
	if err != nil {
		t.Fatal(err)
	}
	inter, interKey, err := ca.GenerateFulcioIntermediate(caRoot, caRootKey)
	if err != nil {
		t.Fatal(err)
	}
	tsaRoot, tsaRootKey, err := ca.GenerateRootCa()
	if err != nil {
		t.Fatal(err)
	}
	tsaInter, tsaInterKey, err := ca.GenerateTSAIntermediate(tsaRoot, tsaRootKey)
	if err != nil {
		t.Fatal(err)
	}
	tsaKey, err := ecdsa.GenerateKey(caRootKey.Curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// Valid from a minute ago for ten minutes: the test's lifetime.
	nb := time.Now().Add(-time.Minute)
	tsaLeaf, err := ca.GenerateTSALeafCert(nb, tsaKey, tsaInter, tsaInterKey)
	if err != nil {
		t.Fatal(err)
	}
	return &ownAuthorities{
		ca: &root.FulcioCertificateAuthority{
			Root: caRoot, Intermediates: []*x509.Certificate{inter},
			ValidityPeriodStart: time.Now().Add(-time.Hour), ValidityPeriodEnd: time.Now().Add(time.Hour),
		},
		caKey: interKey,
		tsa: &root.SigstoreTimestampingAuthority{
			Root: tsaRoot, Intermediates: []*x509.Certificate{tsaInter}, Leaf: tsaLeaf,
			ValidityPeriodStart: time.Now().Add(-time.Hour), ValidityPeriodEnd: time.Now().Add(time.Hour),
		},
		tsaKey: tsaKey,
	}
}

// publicOnly lends a public key to ca.GenerateLeafCert, which asks a
// crypto.Signer for it and signs nothing with it.
type publicOnly struct{ pub crypto.PublicKey }

func (p publicOnly) Public() crypto.PublicKey { return p.pub }
func (p publicOnly) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("publicOnly cannot sign")
}

// Certify issues a Fulcio-style certificate (subject alternative name
// identity, OIDC issuer extension issuer, code signing, ten minutes from a
// minute ago) for pub, by a certificate authority of s's trust root, and
// returns it and its chain (intermediate, then root) as PEM: what `cosign
// sign --key K --certificate CERT --certificate-chain CHAIN` takes.
func (s *Sigstore) Certify(t testing.TB, pub crypto.PublicKey, identity, issuer string) (certPEM, chainPEM []byte) {
	t.Helper()
	c, err := ca.GenerateLeafCert(identity, issuer, time.Now().Add(-time.Minute), publicOnly{pub}, s.own.ca.Intermediates[0], s.own.caKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	for _, p := range []*x509.Certificate{s.own.ca.Intermediates[0], s.own.ca.Root} {
		chainPEM = append(chainPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Raw})...)
	}
	return certPEM, chainPEM
}

// TimestampAuthority starts an RFC 3161 timestamp authority of s's trust
// root on loopback (closed when the test ends) and returns its URL: it
// answers a POSTed application/timestamp-query with a response signed by
// its leaf certificate, as `cosign sign --timestamp-server-url` expects.
func (s *Sigstore) TimestampAuthority(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/timestamp-query" {
			http.Error(w, "want a POSTed application/timestamp-query", http.StatusBadRequest)
			return
		}
		req, err := timestamp.ParseRequest(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := (&timestamp.Timestamp{
			HashAlgorithm: req.HashAlgorithm, HashedMessage: req.HashedMessage, Nonce: req.Nonce,
			Time: time.Now(), Policy: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 2},
			ExtraExtensions: req.Extensions,
		}).CreateResponseWithOpts(s.own.tsa.Leaf, s.own.tsaKey, crypto.SHA256)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/timestamp-reply")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
