package oci

import (
	"context"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// The twentieth pass (docs/security-tests.md): what publishing promises.
// Push uploads the component it is given and nothing else, reports the
// registry's refusal and is bounded by the caller's deadline; Sign signs
// only a pinned reference, a payload naming the image as cosign does,
// keeps the signatures already there and never replaces them with its
// own when it cannot read them; ParseSigner refuses a bad key or
// password saying so.

// TestPushRefusesWhatIsNotAComponent: Push uploads a WebAssembly
// component only (a core module, which maiden pull would refuse, is
// refused before anything reaches the registry).
func TestPushRefusesWhatIsNotAComponent(t *testing.T) {
	t.Parallel()
	host, _ := testRegistry(t)
	core := []byte("\x00asm\x01\x00\x00\x00")
	r := ref(t, "oci://"+host+"/twentieth/core:v1")
	p, err := Push(context.Background(), r, core, nil)
	if !errors.Is(err, ErrNotComponent) || !strings.Contains(err.Error(), "not a WebAssembly component") {
		t.Fatalf("Push of a core module = %v, %v; want ErrNotComponent", p, err)
	}
	if _, err := Resolve(context.Background(), r, nil); err == nil {
		t.Errorf("the registry holds %s after a refused Push", r)
	}
}

// passOr serves method with f and every other request with the registry.
func passOr(h *hostile, method string, f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == method {
			f(w, r)
			return
		}
		h.reg.ServeHTTP(w, r)
	}
}

func denied(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte(`{"errors":[{"code":"DENIED","message":"repository is read-only"}]}`))
}

// TestPublishReportsTheRegistrysRefusal: a registry that refuses the
// manifest (Push) or the signature (Sign) fails the operation with the
// registry's words; neither returns success for what was not stored.
func TestPublishReportsTheRegistrysRefusal(t *testing.T) {
	t.Parallel()
	host, h := testRegistry(t)
	ctx := context.Background()
	kp := newKeyPair(t)

	const repo = "twentieth/readonly"
	h.override("/v2/"+repo+"/manifests/v1", passOr(h, http.MethodPut, denied))
	p, err := Push(ctx, ref(t, "oci://"+host+"/"+repo+":v1"), echo(t), nil)
	if err == nil || !strings.Contains(err.Error(), "repository is read-only") || !strings.Contains(err.Error(), "push ") {
		t.Errorf("Push to a registry refusing the manifest = %v, %v; want its refusal", p, err)
	}

	pinned := push(t, "oci://"+host+"/twentieth/sigdenied:v1", echo(t))
	h.override("/v2/twentieth/sigdenied/manifests/"+signatureTag(pinned.Digest), passOr(h, http.MethodPut, denied))
	err = Sign(ctx, pinned, kp.signer, nil)
	if err == nil || !strings.Contains(err.Error(), "push signature") || !strings.Contains(err.Error(), "repository is read-only") {
		t.Errorf("Sign at a registry refusing the signature = %v; want its refusal", err)
	}
}

// TestSignKeepsEarlierSignatures: a second Sign appends (as cosign does):
// the component stays verifiable with the first key; and a Sign that
// cannot read the signatures already there fails rather than writing a
// manifest holding its own only.
func TestSignKeepsEarlierSignatures(t *testing.T) {
	t.Parallel()
	host, h := testRegistry(t)
	ctx := context.Background()
	first, second, third := newKeyPair(t), newKeyPair(t), newKeyPair(t)
	pinned := push(t, "oci://"+host+"/twentieth/twokeys:v1", echo(t))
	if err := Sign(ctx, pinned, first.signer, nil); err != nil {
		t.Fatal(err)
	}
	if err := Sign(ctx, pinned, second.signer, nil); err != nil {
		t.Fatal(err)
	}
	for i, k := range []keyPair{first, second} {
		if c, err := Pull(ctx, pinned, newStore(t), &PullOptions{Key: k.pub}); err != nil || c.Signer != k.pub.ID {
			t.Errorf("Pull with the key of signature %d after two Signs = %+v, %v; want it verified", i+1, c, err)
		}
	}

	var writes atomic.Int32
	path := "/v2/twentieth/twokeys/manifests/" + signatureTag(pinned.Digest)
	// Reading the signatures fails (GET); the registry answers the rest.
	h.override(path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			if r.Method == http.MethodPut {
				writes.Add(1)
			}
			h.reg.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"errors":[{"code":"UNKNOWN","message":"storage unavailable"}]}`))
	})
	err := Sign(ctx, pinned, third.signer, nil)
	h.override(path, nil)
	if err == nil || !strings.Contains(err.Error(), "storage unavailable") || writes.Load() != 0 {
		t.Errorf("Sign when the signatures cannot be read = %v, %d manifest writes; want the registry's error and no write", err, writes.Load())
	}
	if _, err := Pull(ctx, pinned, newStore(t), &PullOptions{Key: first.pub}); err != nil {
		t.Errorf("Pull with the first key after a Sign that could not read the signatures: %v; want the first signature kept", err)
	}
}

// TestSignOnlyPinned: Sign of a reference without a digest is refused
// (ErrNotPinned): a tag can move, a signature is of one manifest.
func TestSignOnlyPinned(t *testing.T) {
	t.Parallel()
	host, _ := testRegistry(t)
	kp := newKeyPair(t)
	push(t, "oci://"+host+"/twentieth/tagonly:v1", echo(t))
	err := Sign(context.Background(), ref(t, "oci://"+host+"/twentieth/tagonly:v1"), kp.signer, nil)
	if !errors.Is(err, ErrNotPinned) {
		t.Fatalf("Sign of a tag = %v; want ErrNotPinned", err)
	}
}

// TestSignedPayloadNamesTheImage: the payload Sign signs is cosign's
// simple signing of this image: its type, the pinned digest and the
// image's full name (registry and repository, as cosign writes it; the
// repository alone would name an image on Docker Hub).
func TestSignedPayloadNamesTheImage(t *testing.T) {
	t.Parallel()
	host, _ := testRegistry(t)
	kp := newKeyPair(t)
	pinned := push(t, "oci://"+host+"/twentieth/named:v1", echo(t))
	if err := Sign(context.Background(), pinned, kp.signer, nil); err != nil {
		t.Fatal(err)
	}
	pr, err := pinned.parsed()
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(pr.Context().Tag(signatureTag(pinned.Digest)))
	if err != nil {
		t.Fatal(err)
	}
	img, err := desc.Image()
	if err != nil {
		t.Fatal(err)
	}
	// The newest signature is the last layer (a run with -count=2 signs
	// the same component again).
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("signature layers: %d, %v", len(layers), err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Critical struct {
			Identity struct {
				DockerReference string `json:"docker-reference"`
			} `json:"identity"`
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
			Type string `json:"type"`
		} `json:"critical"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	want := host + "/twentieth/named"
	if p.Critical.Identity.DockerReference != want || p.Critical.Image.Digest != pinned.Digest || p.Critical.Type != "cosign container image signature" {
		t.Errorf("signed payload %s; want type cosign container image signature, digest %s, docker-reference %s", body, pinned.Digest, want)
	}
}

// stallPut holds every PUT until the client hangs up, then closes gone;
// other requests reach the registry.
func stallPut(h *hostile, gone chan struct{}) http.HandlerFunc {
	var once sync.Once
	return passOr(h, http.MethodPut, func(w http.ResponseWriter, r *http.Request) {
		// Read the body: the server notices the client hanging up only
		// once it has.
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		once.Do(func() { close(gone) })
	})
}

// TestPublishDeadline: Push and Sign are bounded by PullOptions.Timeout
// (a registry that never answers an upload does not hang maiden publish)
// and say which registry and stage did not finish.
func TestPublishDeadline(t *testing.T) {
	t.Parallel()
	host, h := testRegistry(t)
	kp := newKeyPair(t)
	const timeout = 2 * time.Second
	opts := &PullOptions{Timeout: timeout}
	check := func(t *testing.T, what string, err error, gone chan struct{}) {
		t.Helper()
		var de *DeadlineError
		if !errors.Is(err, ErrDeadline) || !errors.As(err, &de) || de.Registry != host || de.Stage != StageUpload || de.Timeout != timeout {
			t.Fatalf("%s at a registry that never answers = %v; want ErrDeadline of the upload to %s after %v", what, err, host, timeout)
		}
		select {
		case <-gone:
		case <-time.After(30 * time.Second):
			t.Fatal("the registry never saw the client hang up")
		}
	}
	t.Run("push", func(t *testing.T) {
		t.Parallel()
		gone := make(chan struct{})
		h.override("/v2/twentieth/slowpush/manifests/v1", stallPut(h, gone))
		// The caller's own deadline is longer: only the Timeout ends it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := Push(ctx, ref(t, "oci://"+host+"/twentieth/slowpush:v1"), echo(t), opts)
		check(t, "Push", err, gone)
	})
	t.Run("sign", func(t *testing.T) {
		t.Parallel()
		pinned := push(t, "oci://"+host+"/twentieth/slowsign:v1", echo(t))
		gone := make(chan struct{})
		h.override("/v2/twentieth/slowsign/manifests/"+signatureTag(pinned.Digest), stallPut(h, gone))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		check(t, "Sign", Sign(ctx, pinned, kp.signer, opts), gone)
	})
}

// TestParseSignerRefuses: a key that does not parse, or an encrypted key
// with the wrong password, is refused as a private key problem; the
// password function's own error is what is reported.
func TestParseSignerRefuses(t *testing.T) {
	t.Parallel()
	pw := func(b string) func() ([]byte, error) { return func() ([]byte, error) { return []byte(b), nil } }
	enc, _, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte("right")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSigner(enc, pw("right")); err != nil {
		t.Fatalf("the right password: %v", err)
	}
	errNoTerminal := errors.New("no terminal to ask for the password")
	for _, tt := range []struct {
		name string
		pem  []byte
		pass func() ([]byte, error)
		want string
		is   error
	}{
		{"not PEM", []byte("hunter2"), nil, "private key: PEM decoding failed", nil},
		{"wrong password", enc, pw("wrong"), "private key: encrypted: decryption failed", nil},
		{"password not read", enc, func() ([]byte, error) { return nil, errNoTerminal }, "private key: no terminal", errNoTerminal},
	} {
		s, err := ParseSigner(tt.pem, tt.pass)
		if s != nil || err == nil || !strings.HasPrefix(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("%s: ParseSigner = %v, %v; want an error starting %q", tt.name, s, err, tt.want)
		}
	}
}
