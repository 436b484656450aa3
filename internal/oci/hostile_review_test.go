package oci

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestSignatureCandidatesBounded (the fourth review): a registry (or whoever can push to the
// repository) lists thousands of layers in the .sig manifest and in a
// referrer's manifest, all naming one small blob. Each layer is a
// download kept in memory until verification: with 1 MiB manifests and
// 64 KiB blobs that is ~300 MB from the .sig tag and ~8 GB from 16
// referrers, before the component is even looked at. The number of
// candidates fetched must be bounded like the referrers are.
func TestSignatureCandidatesBounded(t *testing.T) {
	host, h := testRegistry(t)
	ctx := context.Background()
	kp := newKeyPair(t)
	const repo = "review/sigbomb"
	pinned := push(t, "oci://"+host+"/"+repo+":v1", echo(t))
	pinned.Tag = ""
	const layers = 500

	junk := []byte(`{"not":"a signature"}`)
	jd := digestOf(junk)
	var sigFetches, bundleFetches atomic.Int64

	var sb strings.Builder
	for i := 0; i < layers; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"mediaType":%q,"digest":%q,"size":%d,"annotations":{%q:"AAAA"}}`, cosignSigMediaType, jd, len(junk), cosignSigAnnotation)
	}
	sigManifest := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":2},"layers":[%s]}`, digestOf([]byte("{}")), sb.String())
	h.override("/v2/"+repo+"/manifests/"+signatureTag(pinned.Digest), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Docker-Content-Digest", digestOf([]byte(sigManifest)))
		w.Write([]byte(sigManifest))
	})

	bjunk := []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`)
	bd := digestOf(bjunk)
	sb.Reset()
	for i := 0; i < layers; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"mediaType":%q,"digest":%q,"size":%d}`, bundleMediaTypeV03, bd, len(bjunk))
	}
	bundleManifest := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":%q,"config":{"mediaType":%q,"digest":%q,"size":2},"layers":[%s]}`, bundleMediaTypeV03, emptyArtifactType, digestOf([]byte("{}")), sb.String())
	bmd := digestOf([]byte(bundleManifest))
	index := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":%q,"digest":%q,"size":%d}]}`, bundleMediaTypeV03, bmd, len(bundleManifest))
	h.override("/v2/"+repo+"/referrers/"+pinned.Digest, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
		w.Write([]byte(index))
	})
	h.override("/v2/"+repo+"/manifests/"+bmd, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Docker-Content-Digest", bmd)
		w.Write([]byte(bundleManifest))
	})
	h.override("/v2/"+repo+"/blobs/"+jd, func(w http.ResponseWriter, r *http.Request) {
		sigFetches.Add(1)
		w.Write(junk)
	})
	h.override("/v2/"+repo+"/blobs/"+bd, func(w http.ResponseWriter, r *http.Request) {
		bundleFetches.Add(1)
		w.Write(bjunk)
	})

	_, err := Pull(ctx, pinned, newStore(t), &PullOptions{Key: kp.pub})
	if !errors.Is(err, ErrBadSignature) {
		t.Fatalf("Pull = %.300v; want ErrBadSignature", err)
	}
	t.Logf("%d signature payloads and %d bundles downloaded", sigFetches.Load(), bundleFetches.Load())
	const bound = 16 // maxSignatures, maxBundles
	if n := sigFetches.Load(); n > bound {
		t.Errorf("%d signature payloads downloaded for one .sig manifest of %d; want at most %d", n, layers, bound)
	}
	if n := bundleFetches.Load(); n > bound {
		t.Errorf("%d bundles downloaded for one referrer of %d layers; want at most %d", n, layers, bound)
	}
}

// TestManifestCapNotByPathSubstring (the fourth review): the 1 MiB manifest cap must hold
// for a repository with a "blobs" element in its name, and for a
// manifest request the registry redirects off /v2/.
func TestManifestCapNotByPathSubstring(t *testing.T) {
	host, h := testRegistry(t)
	ctx := context.Background()
	d := "sha256:" + strings.Repeat("3", 64)

	t.Run("repository named .../blobs/...", func(t *testing.T) {
		repo := "review/blobs/x"
		h.override("/v2/"+repo+"/manifests/"+d, hugeBody(MaxManifestBytes+1, false))
		_, err := Pull(ctx, ref(t, "oci://"+host+"/"+repo+"@"+d), newStore(t), nil)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Pull = %v; want ErrTooLarge", err)
		}
	})
	t.Run("manifest redirected off /v2/", func(t *testing.T) {
		repo := "review/redir"
		h.override("/v2/"+repo+"/manifests/"+d, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere/manifest", http.StatusTemporaryRedirect)
		})
		h.override("/elsewhere/manifest", hugeBody(MaxManifestBytes+1, false))
		_, err := Pull(ctx, ref(t, "oci://"+host+"/"+repo+"@"+d), newStore(t), nil)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Pull = %v; want ErrTooLarge", err)
		}
	})
}
