package oci

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/oci/ocitest"
)

const (
	testIssuer   = "https://issuer.example"
	testIdentity = "release@acme.example"
)

// TestKeyless: a component signed keyless (a Sigstore bundle attached as
// an OCI referrer, certified by a throwaway trust root made here) pulls,
// loads offline and names its signer; each way of not being signed by
// that identity, as that issuer, under that root, over that digest, with
// the evidence required, is refused with its own reason and stores
// nothing.
func TestKeyless(t *testing.T) {
	host, _ := testRegistry(t)
	ctx := context.Background()
	ss, foreign := ocitest.NewSigstore(t), ocitest.NewSigstore(t)
	trusted := ss.TrustedRoot(t)
	kl, err := NewKeyless(trusted, testIssuer, testIdentity, true)
	if err != nil {
		t.Fatal(err)
	}
	noTlog, err := NewKeyless(trusted, testIssuer, testIdentity, false)
	if err != nil {
		t.Fatal(err)
	}
	// sign pushes echo to repo and attaches the bundle sg describes (its
	// digest defaulting to the pushed one).
	sign := func(t *testing.T, repo string, by *ocitest.Sigstore, sg ocitest.Signing) Ref {
		t.Helper()
		p := push(t, "oci://"+host+"/"+repo+":v1", echo(t))
		if sg.Digest == "" {
			sg.Digest = p.Digest
		}
		ocitest.Attach(t, host, repo, p.Digest, by.Bundle(t, sg))
		return p
	}
	good := ocitest.Signing{Identity: testIdentity, Issuer: testIssuer}
	other := push(t, "oci://"+host+"/keyless/other:v1", variant(t, "other"))

	t.Run("signed round trip", func(t *testing.T) {
		t.Parallel()
		p := sign(t, "keyless/ok", ss, good)
		st := newStore(t)
		c, err := Pull(ctx, p, st, &PullOptions{Keyless: kl})
		if err != nil || c.Signer != "keyless:"+testIssuer+" "+testIdentity {
			t.Fatalf("Pull = %+v, %v; want signer %s", c, err, kl.ID)
		}
		if c, err := st.LoadKeyless(p, kl); err != nil || c.Signer != kl.ID {
			t.Fatalf("LoadKeyless = %+v, %v", c, err)
		}
		// The stored bundle names kl's signer only: another identity finds
		// none, offline.
		mallory, err := NewKeyless(trusted, testIssuer, "mallory@acme.example", true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.LoadKeyless(p, mallory); !errors.Is(err, ErrUnsigned) {
			t.Fatalf("LoadKeyless by another identity = %v; want ErrUnsigned", err)
		}
	})

	t.Run("a message signature over the manifest", func(t *testing.T) {
		t.Parallel()
		p := push(t, "oci://"+host+"/keyless/message:v1", echo(t))
		ocitest.Attach(t, host, "keyless/message", p.Digest, ss.MessageBundle(t, good, manifestOf(t, p)))
		if c, err := Pull(ctx, p, newStore(t), &PullOptions{Keyless: kl}); err != nil || c.Signer != kl.ID {
			t.Fatalf("Pull = %+v, %v", c, err)
		}
		// Over another manifest's bytes, attached to this one.
		q := push(t, "oci://"+host+"/keyless/message-other:v1", echo(t))
		ocitest.Attach(t, host, "keyless/message-other", q.Digest, ss.MessageBundle(t, good, manifestOf(t, other)))
		_, err := Pull(ctx, q, newStore(t), &PullOptions{Keyless: kl})
		if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "failed to verify signature: artifact does not match digest") {
			t.Fatalf("Pull of a message signature over another manifest = %v; want ErrBadSignature", err)
		}
	})

	t.Run("signed with a timestamp only, transparency_log = false", func(t *testing.T) {
		t.Parallel()
		sg := good
		sg.NoTlog = true
		p := sign(t, "keyless/tsa", ss, sg)
		if c, err := Pull(ctx, p, newStore(t), &PullOptions{Keyless: noTlog}); err != nil || c.Signer != noTlog.ID {
			t.Fatalf("Pull = %+v, %v", c, err)
		}
		// The same bundle where a log entry is required (the default).
		_, err := Pull(ctx, p, newStore(t), &PullOptions{Keyless: kl})
		if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "failed to verify log inclusion") {
			t.Fatalf("Pull requiring a log entry = %v; want ErrBadSignature (log inclusion)", err)
		}
	})

	cases := []struct {
		name string
		by   *ocitest.Sigstore
		sg   ocitest.Signing
		kl   *Keyless
		want error
		why  string // in the error
	}{
		{name: "another identity", by: ss, sg: ocitest.Signing{Identity: "mallory@acme.example", Issuer: testIssuer},
			want: ErrBadSignature, why: `expected SAN value "release@acme.example", got "mallory@acme.example"`},
		{name: "another issuer", by: ss, sg: ocitest.Signing{Identity: testIdentity, Issuer: "https://evil.example"},
			want: ErrBadSignature, why: `expected issuer value "https://issuer.example", got "https://evil.example"`},
		{name: "a CA not in the trusted root", by: foreign, sg: ocitest.Signing{Identity: testIdentity, Issuer: testIssuer, Evidence: ss},
			want: ErrBadSignature, why: "failed to verify leaf certificate"},
		{name: "a bundle over another digest", by: ss, sg: ocitest.Signing{Identity: testIdentity, Issuer: testIssuer, Digest: other.Digest},
			want: ErrBadSignature, why: "provided artifact digest does not match any digest in statement"},
		{name: "an attestation, not a signature", by: ss, sg: ocitest.Signing{Identity: testIdentity, Issuer: testIssuer, Predicate: "https://spdx.dev/Document"},
			want: ErrBadSignature, why: `an attestation of type "https://spdx.dev/Document", not a signature`},
		{name: "no log entry when one is required", by: ss, sg: ocitest.Signing{Identity: testIdentity, Issuer: testIssuer, NoTlog: true},
			want: ErrBadSignature, why: "failed to verify log inclusion"},
		{name: "no evidence at all, transparency_log = false", by: ss, sg: ocitest.Signing{Identity: testIdentity, Issuer: testIssuer, NoTlog: true, NoTimestamp: true}, kl: noTlog,
			want: ErrBadSignature, why: "threshold not met for verified signed & log entry integrated timestamps: 0 < 1"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := sign(t, "keyless/hostile"+string(rune('a'+i)), tc.by, tc.sg)
			pol := tc.kl
			if pol == nil {
				pol = kl
			}
			st := newStore(t)
			_, err := Pull(ctx, p, st, &PullOptions{Keyless: pol})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Pull = %v; want %v naming %q", err, tc.want, tc.why)
			}
			if _, err := st.LoadKeyless(p, pol); !errors.Is(err, ErrNotInStore) {
				t.Fatalf("Load after a refused Pull = %v; want ErrNotInStore", err)
			}
		})
	}

	t.Run("a tampered bundle", func(t *testing.T) {
		t.Parallel()
		p := push(t, "oci://"+host+"/keyless/tampered:v1", echo(t))
		sg := good
		sg.Digest = p.Digest
		ocitest.Attach(t, host, "keyless/tampered", p.Digest, ocitest.Tamper(t, ss.Bundle(t, sg)))
		_, err := Pull(ctx, p, newStore(t), &PullOptions{Keyless: kl})
		if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "not signed by "+kl.ID) {
			t.Fatalf("Pull = %v; want ErrBadSignature", err)
		}
	})

	t.Run("unsigned", func(t *testing.T) {
		t.Parallel()
		p := push(t, "oci://"+host+"/keyless/unsigned:v1", echo(t))
		_, err := Pull(ctx, p, newStore(t), &PullOptions{Keyless: kl})
		if !errors.Is(err, ErrUnsigned) || !strings.Contains(err.Error(), "no Sigstore bundle referring to "+p.Digest) {
			t.Fatalf("Pull = %v; want ErrUnsigned", err)
		}
	})

	t.Run("offline provenance check of the stored bundle", func(t *testing.T) {
		t.Parallel()
		p := sign(t, "keyless/prov", ss, good)
		st := newStore(t)
		if _, err := Pull(ctx, p, st, &PullOptions{Keyless: kl}); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{st.blob(p.Digest), st.blob(digestOf(echo(t)))} {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.VerifyBundle(p.Digest, kl); err != nil {
			t.Fatalf("VerifyBundle = %v", err)
		}
		if err := st.VerifyBundle(other.Digest, kl); !errors.Is(err, ErrUnsigned) {
			t.Fatalf("VerifyBundle of a digest never pulled = %v; want ErrUnsigned", err)
		}
		// The stored bundle moved onto another digest's name.
		b, err := os.ReadFile(st.bundleFile(p.Digest, kl.ID))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(st.bundleFile(other.Digest, kl.ID), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := st.VerifyBundle(other.Digest, kl); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("VerifyBundle of a bundle over another digest = %v; want ErrBadSignature", err)
		}
		// Another trust root: the stored bundle's CA is not in it.
		elsewhere, err := NewKeyless(foreign.TrustedRoot(t), testIssuer, testIdentity, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.VerifyBundle(p.Digest, elsewhere); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("VerifyBundle against another trusted root = %v; want ErrBadSignature", err)
		}
	})
}

func TestNewKeylessRefuses(t *testing.T) {
	ss := ocitest.NewSigstore(t)
	for _, tc := range []struct {
		name, root, issuer, identity, want string
	}{
		{"not a trusted root", "{}", testIssuer, testIdentity, "trusted root"},
		{"no issuer", string(ss.TrustedRoot(t)), "", testIdentity, "must be non-empty"},
		{"an identity with a space", string(ss.TrustedRoot(t)), testIssuer, "a b", "without spaces"},
	} {
		if _, err := NewKeyless([]byte(tc.root), tc.issuer, tc.identity, true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewKeyless = %v; want %q", tc.name, err, tc.want)
		}
	}
}
