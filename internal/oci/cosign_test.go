package oci

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/maiden-run/maiden/internal/oci/ocitest"
)

// cosignBin and cosign are ocitest's, named for this file's brevity.
func cosignBin(t *testing.T) string { return ocitest.CosignCLI(t) }

func cosign(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	return ocitest.RunCosign(t, bin, dir, args...)
}

// TestCosignInterop checks signatures against the real cosign CLI in both
// directions, with a key pair cosign generated (its encrypted cosign.key
// format): what `cosign sign --key` attaches verifies here, what Sign
// attaches passes `cosign verify --key`, and cosign refuses what nobody
// signed (so its acceptance means something).
func TestCosignInterop(t *testing.T) {
	bin := cosignBin(t)
	host, _ := testRegistry(t)
	base := "oci://" + host + "/" + cosignRepo() + "/"
	ctx := context.Background()
	dir := t.TempDir()
	if out, err := cosign(t, bin, dir, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	pubPEM, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "cosign.key"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParseKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	other := newKeyPair(t)
	name := func(r Ref) string { return r.Registry + "/" + r.Repository + "@" + r.Digest }

	t.Run("cosign signs, maiden verifies", func(t *testing.T) {
		t.Parallel()
		p := push(t, base+"signed-by-cosign:v1", echo(t))
		if out, err := cosign(t, bin, dir, "sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-http-registry", "--yes", name(p)); err != nil {
			t.Fatalf("cosign sign: %v\n%s", err, out)
		}
		c, err := Pull(ctx, p, newStore(t), &PullOptions{Key: pub})
		if err != nil || c.Signer != pub.ID {
			t.Fatalf("Pull of a cosign-signed component = %+v, %v", c, err)
		}
		if _, err := Pull(ctx, p, newStore(t), &PullOptions{Key: other.pub}); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Pull with another key = %v; want ErrBadSignature", err)
		}
	})
	t.Run("cosign signs a bundle with the key, maiden verifies", func(t *testing.T) {
		t.Parallel()
		// cosign v3's default layout: a Sigstore bundle (a DSSE in-toto
		// statement naming the digest, the key's hint, no certificate)
		// attached as an OCI referrer, no .sig tag.
		p := push(t, base+"bundle-by-cosign:v1", echo(t))
		if out, err := cosign(t, bin, dir, "sign", "--key", "cosign.key", "--new-bundle-format", "--tlog-upload=false", "--allow-http-registry", "--yes", name(p)); err != nil {
			t.Fatalf("cosign sign --new-bundle-format: %v\n%s", err, out)
		}
		pr, err := p.parsed()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := remote.Get(pr.Context().Tag(signatureTag(p.Digest))); !isNotFound(err) {
			t.Fatalf("cosign wrote a .sig tag too (%v): this case would not test the bundle", err)
		}
		st := newStore(t)
		c, err := Pull(ctx, p, st, &PullOptions{Key: pub})
		if err != nil || c.Signer != pub.ID {
			t.Fatalf("Pull of a component cosign signed as a bundle = %+v, %v", c, err)
		}
		if c, err := st.Load(p, pub); err != nil || c.Signer != pub.ID {
			t.Fatalf("Load of the stored bundle = %+v, %v", c, err)
		}
		if err := st.VerifySignature(p.Digest, pub); err != nil {
			t.Fatalf("VerifySignature of the stored bundle: %v", err)
		}
		// The stored bundle is verified again on every load: one with its
		// signature changed does not load.
		var stored signature
		if b, err := os.ReadFile(st.sigFile(p.Digest, pub)); err != nil || json.Unmarshal(b, &stored) != nil || len(stored.Bundle) == 0 {
			t.Fatalf("the stored signature is not the bundle: %s, %v", b, err)
		}
		tampered, err := json.Marshal(signature{Bundle: ocitest.Tamper(t, stored.Bundle)})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(st.sigFile(p.Digest, pub), tampered, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Load(p, pub); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Load of a changed stored bundle = %v; want ErrBadSignature", err)
		}
		if _, err := Pull(ctx, p, newStore(t), &PullOptions{Key: other.pub}); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "bundle not signed by key "+other.pub.ID) {
			t.Fatalf("Pull with another key = %v; want ErrBadSignature naming the key", err)
		}
		// An attestation by the same key over the same kind of component
		// (cosign attest, same referrer layout): not a signature.
		a := push(t, base+"bundle-attested:v1", variant(t, "attested"))
		if err := os.WriteFile(filepath.Join(dir, "predicate.json"), []byte(`{"builder":"ci"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := cosign(t, bin, dir, "attest", "--key", "cosign.key", "--new-bundle-format", "--tlog-upload=false", "--type", "https://slsa.dev/provenance/v1",
			"--predicate", "predicate.json", "--allow-http-registry", "--yes", name(a)); err != nil {
			t.Fatalf("cosign attest --new-bundle-format: %v\n%s", err, out)
		}
		if _, err := Pull(ctx, a, newStore(t), &PullOptions{Key: pub}); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), `the bundle is an attestation of type "https://slsa.dev/provenance/v1"`) {
			t.Fatalf("Pull of a component with only a cosign attestation = %v; want ErrBadSignature naming the attestation", err)
		}
		// The same bundle, attached to another component: a signature over
		// another digest.
		bundles, err := fetchBundles(pr, p, nil)
		if err != nil || len(bundles) != 1 {
			t.Fatalf("cosign's bundle referrer: %d, %v", len(bundles), err)
		}
		q := push(t, base+"bundle-moved:v1", variant(t, "moved"))
		ocitest.Attach(t, host, q.Repository, q.Digest, bundles[0])
		st = newStore(t)
		if _, err := Pull(ctx, q, st, &PullOptions{Key: pub}); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "does not match any digest in statement") {
			t.Fatalf("Pull of a component carrying another digest's bundle = %v; want ErrBadSignature, digests not matching", err)
		}
		if _, err := st.Load(q, nil); !errors.Is(err, ErrNotInStore) {
			t.Fatalf("Load after a refused Pull = %v; want ErrNotInStore", err)
		}
	})
	t.Run("maiden signs, cosign verifies", func(t *testing.T) {
		t.Parallel()
		p := push(t, base+"signed-by-maiden:v1", echo(t))
		verify := func() (string, error) {
			return cosign(t, bin, dir, "verify", "--key", "cosign.pub", "--insecure-ignore-tlog", "--allow-http-registry", name(p))
		}
		if out, err := verify(); err == nil {
			t.Fatalf("cosign verify accepted an unsigned component:\n%s", out)
		}
		s, err := ParseSigner(keyPEM, func() ([]byte, error) { return []byte("pw"), nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := Sign(ctx, p, s, nil); err != nil {
			t.Fatal(err)
		}
		if out, err := verify(); err != nil {
			t.Fatalf("cosign verify of what Sign attached: %v\n%s", err, out)
		}
	})
}

// TestCosignVerifiesKeyless: a keyless bundle as maiden reads it (a DSSE
// in-toto statement naming the digest, a Fulcio-style certificate from a
// throwaway trust root made here, a Rekor entry and an RFC 3161 timestamp,
// attached as an OCI referrer) passes the real `cosign verify
// --new-bundle-format` against that trust root, and cosign refuses it for
// another identity, so maiden's layout is the one cosign reads.
func TestCosignVerifiesKeyless(t *testing.T) {
	bin := cosignBin(t)
	host, _ := testRegistry(t)
	base := "oci://" + host + "/" + cosignRepo() + "/"
	dir := t.TempDir()
	ss := ocitest.NewSigstore(t)
	if err := os.WriteFile(filepath.Join(dir, "trusted_root.json"), ss.TrustedRoot(t), 0o600); err != nil {
		t.Fatal(err)
	}
	p := push(t, base+"keyless-by-maiden:v1", echo(t))
	name := p.Registry + "/" + p.Repository + "@" + p.Digest
	verify := func(identity string, extra ...string) (string, error) {
		return cosign(t, bin, dir, append([]string{"verify", "--new-bundle-format", "--trusted-root", "trusted_root.json",
			"--certificate-identity", identity, "--certificate-oidc-issuer", testIssuer,
			"--insecure-ignore-sct", "--allow-http-registry"}, append(extra, name)...)...)
	}
	if out, err := verify(testIdentity); err == nil {
		t.Fatalf("cosign verify accepted an unsigned component:\n%s", out)
	}
	b := ss.Bundle(t, ocitest.Signing{Identity: testIdentity, Issuer: testIssuer, Digest: p.Digest})
	ocitest.Attach(t, host, p.Repository, p.Digest, b)
	// maiden's own check of what cosign is about to verify.
	kl, err := NewKeyless(ss.TrustedRoot(t), testIssuer, testIdentity, true)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Pull(context.Background(), p, newStore(t), &PullOptions{Keyless: kl}); err != nil || c.Signer != kl.ID {
		t.Fatalf("Pull = %+v, %v", c, err)
	}
	if out, err := verify(testIdentity); err != nil {
		t.Fatalf("cosign verify of maiden's keyless bundle: %v\n%s", err, out)
	} else if !strings.Contains(out, "The code-signing certificate was verified using trusted certificate authority certificates") {
		t.Fatalf("cosign verify did not say it checked the certificate against the trust root:\n%s", out)
	}
	if out, err := verify(testIdentity, "--use-signed-timestamps", "--insecure-ignore-tlog"); err != nil {
		t.Fatalf("cosign verify of maiden's keyless bundle by its timestamp alone: %v\n%s", err, out)
	}
	if out, err := verify("mallory@acme.example"); err == nil || !strings.Contains(out, `expected SAN value "mallory@acme.example"`) {
		t.Fatalf("cosign verify for another identity = %v; want its refusal naming the identity:\n%s", err, out)
	}
}

// TestCosignSignsKeyless: the real cosign CLI signs "keyless" offline,
// the way a private Sigstore deployment does: its key certified by a
// certificate authority of a throwaway trust root made here (a
// Fulcio-style certificate naming the identity and the OIDC issuer), no
// transparency log, an RFC 3161 timestamp from that root's timestamp
// authority served on loopback. maiden verifies the bundle cosign attaches
// (--new-bundle-format) with transparency_log = false, and refuses it
// where the policy asks for what it lacks or names someone else.
func TestCosignSignsKeyless(t *testing.T) {
	bin := cosignBin(t)
	host, _ := testRegistry(t)
	base := "oci://" + host + "/" + cosignRepo() + "/"
	ctx := context.Background()
	dir := t.TempDir()
	ss := ocitest.NewSigstore(t)
	trusted := ss.TrustedRoot(t)
	pub := ocitest.CosignKeyPair(t, bin, dir)
	cert, chain := ss.Certify(t, pub, testIdentity, testIssuer)
	for f, b := range map[string][]byte{"cert.pem": cert, "chain.pem": chain, "trusted_root.json": trusted} {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tsa := ss.TimestampAuthority(t)
	kl, err := NewKeyless(trusted, testIssuer, testIdentity, false)
	if err != nil {
		t.Fatal(err)
	}
	withTlog, err := NewKeyless(trusted, testIssuer, testIdentity, true)
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := NewKeyless(trusted, testIssuer, "mallory@acme.example", false)
	if err != nil {
		t.Fatal(err)
	}
	p := push(t, base+"keyless-by-cosign:v1", echo(t))
	name := p.Registry + "/" + p.Repository + "@" + p.Digest
	if out, err := cosign(t, bin, dir, "sign", "--key", "cosign.key", "--certificate", "cert.pem", "--certificate-chain", "chain.pem",
		"--new-bundle-format", "--tlog-upload=false", "--timestamp-server-url", tsa, "--allow-http-registry", "--yes", name); err != nil {
		t.Fatalf("cosign sign --certificate --new-bundle-format: %v\n%s", err, out)
	}
	st := newStore(t)
	c, err := Pull(ctx, p, st, &PullOptions{Keyless: kl})
	if err != nil || c.Signer != kl.ID {
		t.Fatalf("Pull of what cosign signed keyless = %+v, %v", c, err)
	}
	if err := st.VerifyBundle(p.Digest, kl); err != nil {
		t.Fatalf("VerifyBundle of the stored bundle: %v", err)
	}
	if _, err := Pull(ctx, p, newStore(t), &PullOptions{Keyless: withTlog}); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "transparency log") {
		t.Fatalf("Pull requiring a transparency-log entry cosign did not make = %v; want ErrBadSignature naming the log", err)
	}
	if _, err := Pull(ctx, p, newStore(t), &PullOptions{Keyless: mallory}); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), `"mallory@acme.example"`) {
		t.Fatalf("Pull for another identity = %v; want ErrBadSignature naming it", err)
	}
	// cosign agrees with itself on the same trust root.
	if out, err := cosign(t, bin, dir, "verify", "--new-bundle-format", "--trusted-root", "trusted_root.json",
		"--certificate-identity", testIdentity, "--certificate-oidc-issuer", testIssuer,
		"--insecure-ignore-sct", "--insecure-ignore-tlog", "--use-signed-timestamps", "--allow-http-registry", name); err != nil {
		t.Fatalf("cosign verify of its own keyless bundle: %v\n%s", err, out)
	}

	// With a transparency log: cosign uploads the DSSE entry to the trust
	// root's Rekor-style log on loopback, and the bundle carries the entry
	// (its promise and inclusion proof), which a policy requiring the log
	// accepts.
	rekor := ss.TransparencyLog(t)
	l := push(t, base+"keyless-by-cosign:logged", variant(t, "logged"))
	lname := l.Registry + "/" + l.Repository + "@" + l.Digest
	if out, err := cosign(t, bin, dir, "sign", "--key", "cosign.key", "--certificate", "cert.pem", "--certificate-chain", "chain.pem",
		"--new-bundle-format", "--rekor-url", rekor, "--allow-http-registry", "--yes", lname); err != nil {
		t.Fatalf("cosign sign --certificate --new-bundle-format --rekor-url: %v\n%s", err, out)
	}
	if c, err := Pull(ctx, l, newStore(t), &PullOptions{Keyless: withTlog}); err != nil || c.Signer != withTlog.ID {
		t.Fatalf("Pull requiring the log of what cosign logged = %+v, %v", c, err)
	}
	if _, err := Pull(ctx, l, newStore(t), &PullOptions{Keyless: kl}); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "timestamp") {
		t.Fatalf("Pull requiring a timestamp cosign did not get = %v; want ErrBadSignature naming the timestamp", err)
	}
	if out, err := cosign(t, bin, dir, "verify", "--new-bundle-format", "--trusted-root", "trusted_root.json",
		"--certificate-identity", testIdentity, "--certificate-oidc-issuer", testIssuer,
		"--insecure-ignore-sct", "--allow-http-registry", lname); err != nil {
		t.Fatalf("cosign verify of its own logged keyless bundle: %v\n%s", err, out)
	}

	// cosign's .sig tag layout (without --new-bundle-format): a
	// simple-signing payload, its signature, and the certificate, chain and
	// timestamp as the layer's annotations.
	q := push(t, base+"keyless-sig-tag:v1", variant(t, "sig-tag"))
	qname := q.Registry + "/" + q.Repository + "@" + q.Digest
	if out, err := cosign(t, bin, dir, "sign", "--key", "cosign.key", "--certificate", "cert.pem", "--certificate-chain", "chain.pem",
		"--tlog-upload=false", "--timestamp-server-url", tsa, "--allow-http-registry", "--yes", qname); err != nil {
		t.Fatalf("cosign sign --certificate: %v\n%s", err, out)
	}
	st = newStore(t)
	c, err = Pull(ctx, q, st, &PullOptions{Keyless: kl})
	if err != nil || c.Signer != kl.ID {
		t.Fatalf("Pull of what cosign signed keyless in its .sig tag = %+v, %v", c, err)
	}
	if c, err := st.LoadKeyless(q, kl); err != nil || c.Signer != kl.ID {
		t.Fatalf("LoadKeyless of the stored .sig tag signature = %+v, %v", c, err)
	}
	if err := st.VerifyBundle(q.Digest, kl); err != nil {
		t.Fatalf("VerifyBundle of the stored .sig tag signature: %v", err)
	}
	if _, err := Pull(ctx, q, newStore(t), &PullOptions{Keyless: mallory}); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), `"mallory@acme.example"`) {
		t.Fatalf("Pull of the .sig tag for another identity = %v; want ErrBadSignature naming it", err)
	}
	if _, err := Pull(ctx, q, newStore(t), &PullOptions{Keyless: withTlog}); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "transparency log") {
		t.Fatalf("Pull of the .sig tag requiring a transparency-log entry = %v; want ErrBadSignature naming the log", err)
	}
	// The .sig tag's signature copied to another component: the payload
	// names another digest.
	o := push(t, base+"keyless-sig-tag:other", variant(t, "sig-tag-other"))
	copySignature(t, q, o)
	st = newStore(t)
	if _, err := Pull(ctx, o, st, &PullOptions{Keyless: kl}); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "the signature is over "+q.Digest) {
		t.Fatalf("Pull of a component carrying another digest's .sig tag = %v; want ErrBadSignature naming the signed digest", err)
	}
	if _, err := st.Load(o, nil); !errors.Is(err, ErrNotInStore) {
		t.Fatalf("Load after a refused Pull = %v; want ErrNotInStore", err)
	}
	// The .sig tag with cosign's Rekor annotation (the log's promise),
	// and no timestamp: a policy requiring the log accepts it.
	lq := push(t, base+"keyless-sig-tag:logged", variant(t, "sig-tag-logged"))
	lqname := lq.Registry + "/" + lq.Repository + "@" + lq.Digest
	if out, err := cosign(t, bin, dir, "sign", "--key", "cosign.key", "--certificate", "cert.pem", "--certificate-chain", "chain.pem",
		"--rekor-url", rekor, "--allow-http-registry", "--yes", lqname); err != nil {
		t.Fatalf("cosign sign --certificate --rekor-url: %v\n%s", err, out)
	}
	st = newStore(t)
	if c, err := Pull(ctx, lq, st, &PullOptions{Keyless: withTlog}); err != nil || c.Signer != withTlog.ID {
		t.Fatalf("Pull requiring the log of the .sig tag cosign logged = %+v, %v", c, err)
	}
	if err := st.VerifyBundle(lq.Digest, withTlog); err != nil {
		t.Fatalf("VerifyBundle of the stored logged .sig tag signature: %v", err)
	}
	if out, err := cosign(t, bin, dir, "verify", "--trusted-root", "trusted_root.json",
		"--certificate-identity", testIdentity, "--certificate-oidc-issuer", testIssuer,
		"--insecure-ignore-sct", "--allow-http-registry", lqname); err != nil {
		t.Fatalf("cosign verify of its own logged .sig tag keyless signature: %v\n%s", err, out)
	}
	// A signature by the same key without the certificate is not keyless.
	u := push(t, base+"keyless-sig-tag:keyonly", variant(t, "sig-tag-keyonly"))
	if out, err := cosign(t, bin, dir, "sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-http-registry", "--yes", u.Registry+"/"+u.Repository+"@"+u.Digest); err != nil {
		t.Fatalf("cosign sign: %v\n%s", err, out)
	}
	if _, err := Pull(ctx, u, newStore(t), &PullOptions{Keyless: kl}); !errors.Is(err, ErrUnsigned) || !strings.Contains(err.Error(), "no signature with a certificate") {
		t.Fatalf("Pull of a key-only signature with a keyless policy = %v; want ErrUnsigned", err)
	}
	// cosign verifies its .sig tag layout the same way.
	if out, err := cosign(t, bin, dir, "verify", "--trusted-root", "trusted_root.json",
		"--certificate-identity", testIdentity, "--certificate-oidc-issuer", testIssuer,
		"--insecure-ignore-sct", "--insecure-ignore-tlog", "--use-signed-timestamps", "--allow-http-registry", qname); err != nil {
		t.Fatalf("cosign verify of its own .sig tag keyless signature: %v\n%s", err, out)
	}
}

// cosignRuns numbers the cosign tests' runs in this process: the registry
// is shared by every test of the process, and cosign adds its signatures
// to what a repository holds already, so each run (go test -count=N)
// pushes to repositories of its own.
var cosignRuns atomic.Int64

// cosignRepo is the repository prefix of one run of a cosign test.
func cosignRepo() string { return "cosign" + strconv.FormatInt(cosignRuns.Add(1), 10) }
