package oci

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/maiden-run/maiden/internal/testkit"
)

// hostile wraps a real registry (go-containerregistry's, on loopback)
// with per-path overrides: a test makes the registry lie about one path.
type hostile struct {
	reg http.Handler
	mu  sync.Mutex
	// over maps a request path to a handler serving it instead.
	over map[string]http.HandlerFunc
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	f := h.over[r.URL.Path]
	h.mu.Unlock()
	if f != nil {
		f(w, r)
		return
	}
	h.reg.ServeHTTP(w, r)
}

func (h *hostile) override(path string, f http.HandlerFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.over[path] = f
}

var (
	regOnce sync.Once
	regHost string
	regH    *hostile
)

// testRegistry is one registry for the package's tests; each test uses
// its own repositories, so they run in parallel.
func testRegistry(t *testing.T) (string, *hostile) {
	t.Helper()
	regOnce.Do(func() {
		regH = &hostile{reg: registry.New(registry.Logger(log.New(io.Discard, "", 0))), over: map[string]http.HandlerFunc{}}
		srv := httptest.NewServer(regH)
		// Shared by every test of the process; it ends with the process.
		regHost = strings.TrimPrefix(srv.URL, "http://")
	})
	return regHost, regH
}

func ref(t *testing.T, s string) Ref {
	t.Helper()
	r, err := ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	echoOnce  sync.Once
	echoBytes []byte
)

// echo is a real component (testdata/tools/echo.wat, built by testkit).
func echo(t *testing.T) []byte {
	t.Helper()
	echoOnce.Do(func() {
		b, err := os.ReadFile(testkit.Component(t, "echo"))
		if err != nil {
			t.Fatal(err)
		}
		echoBytes = b
	})
	if echoBytes == nil {
		t.Fatal("echo component not built")
	}
	return echoBytes
}

// variant is another component: echo with a custom section appended, so
// its bytes and digest differ and it is still a valid component.
func variant(t *testing.T, label string) []byte {
	b := bytes.Clone(echo(t))
	sec := append([]byte{byte(len(label) + 1), byte(len(label))}, label...)
	return append(append(b, 0), sec...)
}

func push(t *testing.T, s string, wasm []byte) Ref {
	t.Helper()
	p, err := Push(context.Background(), ref(t, s), wasm, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type keyPair struct {
	pub    *Key
	signer *Signer
	pubPEM []byte
	keyPEM []byte
}

// newKeyPair makes an unencrypted P-256 pair: cosign's encrypted key
// format costs a scrypt derivation (seconds here) per use, so only the
// cosign interop test uses it.
func newKeyPair(t *testing.T) keyPair {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	privPEM, err := cryptoutils.MarshalPrivateKeyToPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSigner(privPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{pub: k, signer: s, pubPEM: pub, keyPEM: privPEM}
}

func newStore(t *testing.T) *Store {
	t.Helper()
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestParseRef(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for _, tt := range []struct {
		in      string
		want    Ref
		wantErr bool
	}{
		{in: "oci://ghcr.io/acme/echo:v1", want: Ref{Registry: "ghcr.io", Repository: "acme/echo", Tag: "v1"}},
		{in: "oci://ghcr.io/acme/echo@" + d, want: Ref{Registry: "ghcr.io", Repository: "acme/echo", Digest: d}},
		{in: "oci://127.0.0.1:5000/echo:v1@" + d, want: Ref{Registry: "127.0.0.1:5000", Repository: "echo", Tag: "v1", Digest: d}},
		{in: "oci://ghcr.io/acme/echo", wantErr: true},
		{in: "ghcr.io/acme/echo:v1", wantErr: true},
		{in: "oci://ghcr.io/acme/echo@sha256:abc", wantErr: true},
		{in: "oci://ghcr.io/Acme/echo:v1", wantErr: true},
		{in: "oci:///echo:v1", wantErr: true},
		{in: "oci://ghcr.io/acme/echo:v1@sha512:" + strings.Repeat("ab", 64), wantErr: true},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRef(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrBadRef) {
					t.Fatalf("ParseRef(%q) = %+v, %v; want ErrBadRef", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseRef(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if again, err := ParseRef(got.String()); err != nil || again != got {
				t.Fatalf("String() %q does not round-trip: %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestPull(t *testing.T) {
	host, h := testRegistry(t)
	ctx := context.Background()
	kp := newKeyPair(t)
	other := newKeyPair(t)

	t.Run("round trip, then the store alone", func(t *testing.T) {
		t.Parallel()
		pinned := push(t, "oci://"+host+"/rt/echo:v1", echo(t))
		res, err := Resolve(ctx, ref(t, "oci://"+host+"/rt/echo:v1"), nil)
		if err != nil || res.Digest != pinned.Digest {
			t.Fatalf("Resolve = %v, %v; want digest %s", res, err, pinned.Digest)
		}
		st := newStore(t)
		if _, err := st.Load(pinned, nil); !errors.Is(err, ErrNotInStore) {
			t.Fatalf("Load before Pull = %v; want ErrNotInStore", err)
		}
		c, err := Pull(ctx, pinned, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(c.Path)
		if err != nil || !bytes.Equal(got, echo(t)) || c.Digest != pinned.Digest || c.Layer != digestOf(echo(t)) || c.Signer != "" {
			t.Fatalf("Pull = %+v (%d bytes, %v); want the echo component", c, len(got), err)
		}
		again, err := st.Load(pinned, nil)
		if err != nil || again != c {
			t.Fatalf("Load = %+v, %v; want %+v", again, err, c)
		}
	})

	t.Run("signed round trip", func(t *testing.T) {
		t.Parallel()
		pinned := push(t, "oci://"+host+"/signed/echo:v1", echo(t))
		if err := Sign(ctx, pinned, kp.signer, nil); err != nil {
			t.Fatal(err)
		}
		st := newStore(t)
		c, err := Pull(ctx, pinned, st, &PullOptions{Key: kp.pub})
		if err != nil || c.Signer != kp.pub.ID {
			t.Fatalf("Pull = %+v, %v; want signer %s", c, err, kp.pub.ID)
		}
		if c, err := st.Load(pinned, kp.pub); err != nil || c.Signer != kp.pub.ID {
			t.Fatalf("Load = %+v, %v", c, err)
		}
		// The store holds a signature by kp only: another key finds none.
		if _, err := st.Load(pinned, other.pub); !errors.Is(err, ErrUnsigned) {
			t.Fatalf("Load with another key = %v; want ErrUnsigned", err)
		}
	})

	// Each hostile case is refused with its own error, and nothing is
	// stored: a later Load finds nothing.
	hostileCases := []struct {
		name string
		want error
		// setup returns what to pull, and the key to require (or nil).
		setup func(t *testing.T, repo string) (Ref, *Key)
	}{
		{"tag moved after pinning", ErrTagMoved, func(t *testing.T, repo string) (Ref, *Key) {
			first := push(t, "oci://"+host+"/"+repo+":v1", echo(t))
			push(t, "oci://"+host+"/"+repo+":v1", variant(t, "moved"))
			return first, nil // names v1 and the first digest
		}},
		{"registry serves other manifest bytes for the digest", ErrDigestMismatch, func(t *testing.T, repo string) (Ref, *Key) {
			good := push(t, "oci://"+host+"/"+repo+":v1", echo(t))
			evil := push(t, "oci://"+host+"/"+repo+":evil", variant(t, "evil"))
			body := manifestOf(t, evil)
			h.override("/v2/"+repo+"/manifests/"+good.Digest, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				w.Header().Set("Docker-Content-Digest", good.Digest)
				w.Write(body)
			})
			good.Tag = ""
			return good, nil
		}},
		{"registry serves other layer bytes", ErrDigestMismatch, func(t *testing.T, repo string) (Ref, *Key) {
			good := push(t, "oci://"+host+"/"+repo+":v1", echo(t))
			evil := variant(t, "evil-layer")[:len(echo(t))]
			evil[len(evil)-1] ^= 1
			h.override("/v2/"+repo+"/blobs/"+digestOf(echo(t)), func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(evil)))
				w.Write(evil)
			})
			return good, nil
		}},
		{"unsigned, with a key required", ErrUnsigned, func(t *testing.T, repo string) (Ref, *Key) {
			return push(t, "oci://"+host+"/"+repo+":v1", echo(t)), kp.pub
		}},
		{"signed by another key", ErrBadSignature, func(t *testing.T, repo string) (Ref, *Key) {
			p := push(t, "oci://"+host+"/"+repo+":v1", echo(t))
			if err := Sign(ctx, p, other.signer, nil); err != nil {
				t.Fatal(err)
			}
			return p, kp.pub
		}},
		{"signature over another digest", ErrBadSignature, func(t *testing.T, repo string) (Ref, *Key) {
			p := push(t, "oci://"+host+"/"+repo+":v1", echo(t))
			decoy := push(t, "oci://"+host+"/"+repo+":decoy", variant(t, "decoy"))
			if err := Sign(ctx, decoy, kp.signer, nil); err != nil {
				t.Fatal(err)
			}
			// Copy the decoy's signature to where p's would be.
			copySignature(t, decoy, p)
			return p, kp.pub
		}},
		{"huge manifest (declared)", ErrTooLarge, func(t *testing.T, repo string) (Ref, *Key) {
			d := "sha256:" + strings.Repeat("0", 64)
			h.override("/v2/"+repo+"/manifests/"+d, hugeBody(MaxManifestBytes+1, true))
			return ref(t, "oci://"+host+"/"+repo+"@"+d), nil
		}},
		{"huge manifest (undeclared, streamed)", ErrTooLarge, func(t *testing.T, repo string) (Ref, *Key) {
			d := "sha256:" + strings.Repeat("1", 64)
			h.override("/v2/"+repo+"/manifests/"+d, hugeBody(MaxManifestBytes+1, false))
			return ref(t, "oci://"+host+"/"+repo+"@"+d), nil
		}},
		{"huge layer (declared in the manifest)", ErrTooLarge, func(t *testing.T, repo string) (Ref, *Key) {
			m := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":%q,"digest":%q,"size":2},"layers":[{"mediaType":%q,"digest":"sha256:%s","size":%d}]}`,
				ConfigMediaType, digestOf([]byte("{}")), LayerMediaType, strings.Repeat("2", 64), int64(MaxLayerBytes)+1)
			d := digestOf([]byte(m))
			h.override("/v2/"+repo+"/manifests/"+d, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				w.Write([]byte(m))
			})
			h.override("/v2/"+repo+"/blobs/sha256:"+strings.Repeat("2", 64), func(w http.ResponseWriter, r *http.Request) {
				t.Errorf("the layer was requested: %s %s", r.Method, r.URL)
			})
			return ref(t, "oci://"+host+"/"+repo+"@"+d), nil
		}},
		{"manifest list, not a component", ErrNotComponent, func(t *testing.T, repo string) (Ref, *Key) {
			m := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`
			d := digestOf([]byte(m))
			h.override("/v2/"+repo+"/manifests/"+d, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
				w.Write([]byte(m))
			})
			return ref(t, "oci://"+host+"/"+repo+"@"+d), nil
		}},
		{"container image layer, not a component", ErrNotComponent, func(t *testing.T, repo string) (Ref, *Key) {
			m := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":2},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":%q,"size":2}]}`,
				digestOf([]byte("{}")), digestOf([]byte("{}")))
			d := digestOf([]byte(m))
			h.override("/v2/"+repo+"/manifests/"+d, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				w.Write([]byte(m))
			})
			return ref(t, "oci://"+host+"/"+repo+"@"+d), nil
		}},
		{"wasm layer holding a core module, not a component", ErrNotComponent, func(t *testing.T, repo string) (Ref, *Key) {
			core := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
			m := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":%q,"digest":%q,"size":2},"layers":[{"mediaType":%q,"digest":%q,"size":8}]}`,
				ConfigMediaType, digestOf([]byte("{}")), LayerMediaType, digestOf(core))
			d := digestOf([]byte(m))
			h.override("/v2/"+repo+"/manifests/"+d, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				w.Write([]byte(m))
			})
			h.override("/v2/"+repo+"/blobs/"+digestOf(core), func(w http.ResponseWriter, r *http.Request) { w.Write(core) })
			return ref(t, "oci://"+host+"/"+repo+"@"+d), nil
		}},
	}
	for i, tt := range hostileCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, key := tt.setup(t, fmt.Sprintf("hostile/case%d", i))
			st := newStore(t)
			c, err := Pull(ctx, r, st, &PullOptions{Key: key})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Pull = %+v, %v; want %v", c, err, tt.want)
			}
			t.Logf("refused: %v", err)
			if _, err := st.Load(r, key); !errors.Is(err, ErrNotInStore) {
				t.Fatalf("Load after a refused Pull = %v; want ErrNotInStore (nothing stored)", err)
			}
		})
	}
}

func manifestOf(t *testing.T, r Ref) []byte {
	t.Helper()
	pr, err := r.parsed()
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Get(pr)
	if err != nil {
		t.Fatal(err)
	}
	return d.Manifest
}

func copySignature(t *testing.T, from, to Ref) {
	t.Helper()
	f, err := from.parsed()
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(f.Context().Tag(signatureTag(from.Digest)))
	if err != nil {
		t.Fatal(err)
	}
	img, err := desc.Image()
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(f.Context().Tag(signatureTag(to.Digest)), img); err != nil {
		t.Fatal(err)
	}
}

// hugeBody serves n bytes, declaring their length or not.
func hugeBody(n int, declare bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		if declare {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		if r.Method == http.MethodHead {
			return
		}
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		for sent := 0; sent < n; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
}

// TestStoreRefusesTampering changes each stored file in turn: Load
// refuses it, naming the digest mismatch, and never returns the path.
func TestStoreRefusesTampering(t *testing.T) {
	host, _ := testRegistry(t)
	ctx := context.Background()
	kp := newKeyPair(t)
	pinned := push(t, "oci://"+host+"/tamper/echo:v1", echo(t))
	if err := Sign(ctx, pinned, kp.signer, nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		file func(st *Store) string
		want error
	}{
		{"component layer", func(st *Store) string { return st.blob(digestOf(echo(t))) }, ErrDigestMismatch},
		{"manifest", func(st *Store) string { return st.blob(pinned.Digest) }, ErrDigestMismatch},
		{"signature", func(st *Store) string { return st.sigFile(pinned.Digest, kp.pub) }, ErrBadSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t)
			if _, err := Pull(ctx, pinned, st, &PullOptions{Key: kp.pub}); err != nil {
				t.Fatal(err)
			}
			p := tt.file(st)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x20
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if c, err := st.Load(pinned, kp.pub); !errors.Is(err, tt.want) {
				t.Fatalf("Load after changing the %s = %+v, %v; want %v", tt.name, c, err, tt.want)
			}
		})
	}
}

func TestStoreRefusesSharedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(dir); !errors.Is(err, ErrStore) {
		t.Fatalf("OpenStore(world-writable) = %v; want ErrStore", err)
	}
}

// TestRegistryDown: a pinned component pulled once loads with its
// registry gone; resolving a tag fails naming the registry.
func TestRegistryDown(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	host := strings.TrimPrefix(srv.URL, "http://")
	pinned := push(t, "oci://"+host+"/down/echo:v1", echo(t))
	st := newStore(t)
	if _, err := Pull(context.Background(), pinned, st, nil); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if c, err := st.Load(pinned, nil); err != nil || c.Digest != pinned.Digest {
		t.Fatalf("Load with the registry down = %+v, %v", c, err)
	}
	_, err := Resolve(context.Background(), ref(t, "oci://"+host+"/down/echo:v1"), nil)
	if err == nil || !strings.Contains(err.Error(), "registry "+host) {
		t.Fatalf("Resolve with the registry down = %v; want an error naming registry %s", err, host)
	}
}

// TestPlainHTTPOnlyToLoopback: the transport refuses plain HTTP to any
// other address before dialing.
func TestPlainHTTPOnlyToLoopback(t *testing.T) {
	dialed := false
	tr := capTransport{base: roundTripFunc(func(*http.Request) (*http.Response, error) {
		dialed = true
		return nil, errors.New("unreachable")
	})}
	for _, u := range []string{"http://192.0.2.1/v2/", "http://10.0.0.1:5000/v2/", "http://registry.example/v2/"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "only a loopback registry") || dialed {
			t.Fatalf("RoundTrip(%s) = %v, dialed %v; want the plain-HTTP refusal, no dial", u, err, dialed)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestConcurrentPullsAgree: instances sharing a store pull the same
// digest at once; every pull succeeds and all return the same verified
// component (atomic writes of identical bytes).
func TestConcurrentPullsAgree(t *testing.T) {
	host, _ := testRegistry(t)
	pinned := push(t, "oci://"+host+"/concurrent/echo:v1", echo(t))
	pinned.Tag = ""
	dir := t.TempDir()
	const n = 4
	got := make([]Component, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := OpenStore(dir)
			if err != nil {
				errs[i] = err
				return
			}
			got[i], errs[i] = Pull(context.Background(), pinned, st, nil)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] || got[i].Digest != pinned.Digest {
			t.Fatalf("pull %d = %+v, %v; pull 0 = %+v", i, got[i], errs[i], got[0])
		}
	}
}

// TestVerifySignatureOffline: the provenance check of a recorded digest
// reads only the stored signature: it verifies with the key that signed
// it even after the component's bytes are gone; another key, a digest the
// store holds no signature for, and a changed signature are each refused
// with their own error.
func TestVerifySignatureOffline(t *testing.T) {
	host, _ := testRegistry(t)
	ctx := context.Background()
	kp, other := newKeyPair(t), newKeyPair(t)
	pinned := push(t, "oci://"+host+"/prov/echo:v1", echo(t))
	if err := Sign(ctx, pinned, kp.signer, nil); err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	if _, err := Pull(ctx, pinned, st, &PullOptions{Key: kp.pub}); err != nil {
		t.Fatal(err)
	}
	// Offline and without the component: the layer and manifest removed.
	for _, p := range []string{st.blob(digestOf(echo(t))), st.blob(pinned.Digest)} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.VerifySignature(pinned.Digest, kp.pub); err != nil {
		t.Fatalf("the signing key: %v", err)
	}
	if err := st.VerifySignature(pinned.Digest, other.pub); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("another key: %v, want ErrUnsigned", err)
	}
	if err := st.VerifySignature(digestOf([]byte("never pulled")), kp.pub); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("a digest never pulled: %v, want ErrUnsigned", err)
	}
	if err := st.VerifySignature("sha256:12", kp.pub); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a malformed digest: %v, want ErrBadSignature", err)
	}
	// The stored signature moved onto another digest's name: it signs the
	// first digest, not this one.
	second := digestOf([]byte("another component"))
	b, err := os.ReadFile(st.sigFile(pinned.Digest, kp.pub))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(st.sigFile(second, kp.pub), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.VerifySignature(second, kp.pub); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "the signature is over "+pinned.Digest) {
		t.Fatalf("a signature over another digest: %v, want ErrBadSignature naming the signed digest", err)
	}
	b[len(b)/2] ^= 0x20
	if err := os.WriteFile(st.sigFile(pinned.Digest, kp.pub), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.VerifySignature(pinned.Digest, kp.pub); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a changed signature: %v, want ErrBadSignature", err)
	}
}
