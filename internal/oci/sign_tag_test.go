package oci

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestSignLeavesATagThatIsNotSignatures: a signature tag holding anything
// but an image manifest (here an index) is refused by Sign naming what it
// holds, and left as it was: before, Sign read it as no signatures (or,
// through Image, one of the index's children) and wrote an image of its
// one signature over it.
func TestSignLeavesATagThatIsNotSignatures(t *testing.T) {
	t.Parallel()
	host, _ := testRegistry(t)
	kp := newKeyPair(t)
	pinned := push(t, "oci://"+host+"/signtag/index:v1", echo(t))
	tag, err := name.NewTag(host+"/signtag/index:"+signatureTag(pinned.Digest), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img})
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	before, err := remote.Head(tag)
	if err != nil {
		t.Fatal(err)
	}
	err = Sign(context.Background(), pinned, kp.signer, nil)
	if err == nil || !strings.Contains(err.Error(), "holds a application/vnd.oci.image.index.v1+json, not an image of signatures: it is left as it is") {
		t.Fatalf("Sign where the signature tag holds an index = %v; want a refusal naming what it holds", err)
	}
	after, err := remote.Head(tag)
	if err != nil || after.Digest != before.Digest {
		t.Fatalf("the signature tag after the refused Sign: %v, %v; want the index it held (%s)", after, err, before.Digest)
	}
}

// TestSignBoundedWhileReadingSignatures: Sign's first step, reading the
// signatures already at the tag, is bounded by opts' timeout and says
// which registry and stage did not finish (a DeadlineError of the
// signature stage), as its upload is.
func TestSignBoundedWhileReadingSignatures(t *testing.T) {
	t.Parallel()
	host, h := testRegistry(t)
	kp := newKeyPair(t)
	pinned := push(t, "oci://"+host+"/signtag/stall:v1", echo(t))
	gone := make(chan struct{})
	var once sync.Once
	h.override("/v2/signtag/stall/manifests/"+signatureTag(pinned.Digest), passOr(h, http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		once.Do(func() { close(gone) })
	}))
	const timeout = 2 * time.Second
	// The caller's own deadline is longer: only the Timeout ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Sign(ctx, pinned, kp.signer, &PullOptions{Timeout: timeout})
	var de *DeadlineError
	if !errors.As(err, &de) || de.Registry != host || de.Stage != StageSignature || de.Timeout != timeout {
		t.Fatalf("Sign at a registry that never answers the read of its signatures = %v; want ErrDeadline of the signature stage at %s after %v", err, host, timeout)
	}
	select {
	case <-gone:
	case <-time.After(30 * time.Second):
		t.Fatal("the registry never saw the client hang up")
	}
}
