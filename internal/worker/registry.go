package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
)

// registry maps a tool's path to the version of the file last seen there:
// its digest and where its compiled code is. Loading a version (reading,
// hashing, compiling in a worker) happens once; callers who ask meanwhile
// wait for it.
type registry struct {
	pool *Pool
	mu   sync.Mutex
	m    map[string]*version
}

type version struct {
	key sandbox.FileKey
	// want is the digest the caller that loaded the version pinned the
	// file to ("sha256:HEX", "" for none): bytes hashing to another were
	// refused (a *sandbox.DigestError) before anything else read them.
	want string
	// refused marks err as a *sandbox.DigestError (set before ready is
	// closed).
	refused bool
	ready   chan struct{}
	digest  string // of the component bytes
	world   string // sandbox.WorldTool or WorldMiddleware, read from the bytes here
	art     string // the artifact's key (the digest: one pool, one engine)
	cached  bool   // compiled code was already stored
	compile time.Duration
	err     error
}

// settle is how long after its last modification a file that does not look
// like a component is given to finish being written (an in-place rewrite).
const settle = 2 * time.Second

// get returns the version of the file at path, loading it when the file
// changed. want ("sha256:HEX", "" for none) is the digest the caller
// verified the file as: bytes read that hash to another are refused with a
// *sandbox.DigestError before they are scanned, compiled or run, and so is
// a version loaded for another caller whose digest is not want. The hash is
// the one load takes anyway (the artifact's key); a version loaded under
// the caller's own want costs nothing more.
func (r *registry) get(ctx context.Context, path, want string) (*version, error) {
	for attempt := 0; ; attempt++ {
		key, err := sandbox.StatKey(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", sandbox.ErrInvalidTool, err)
		}
		r.mu.Lock()
		if r.m == nil {
			r.m = map[string]*version{}
		}
		v := r.m[path]
		if v == nil || v.key != key || v.refusedFor(want) {
			v = &version{key: key, want: want, ready: make(chan struct{})}
			r.m[path] = v
			r.mu.Unlock()
			r.load(ctx, path, v)
			v.refused = isDigestError(v.err)
			close(v.ready)
		} else {
			r.mu.Unlock()
		}
		select {
		case <-v.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if v.err != nil {
			if errors.Is(v.err, errChanged) && attempt < 50 {
				continue
			}
			if v.want != want && v.refused && attempt < 50 {
				// Refused for another caller's digest: load it for this
				// one's (refusedFor).
				continue
			}
			if ctx.Err() == nil && (errors.Is(v.err, context.Canceled) || errors.Is(v.err, context.DeadlineExceeded)) && attempt < 50 {
				// The caller who was loading it gave up; this one has not.
				r.forget(path, v)
				continue
			}
			if !errors.Is(v.err, sandbox.ErrInvalidTool) {
				// Not the file's fault (a worker that would not start, the
				// caller giving up): forget it so the next call tries again.
				r.mu.Lock()
				if r.m[path] == v {
					delete(r.m, path)
				}
				r.mu.Unlock()
			}
			return nil, v.err
		}
		if v.want != want {
			// Loaded for a caller pinning another digest, or none.
			if err := sandbox.CheckDigest(path, want, v.digest); err != nil {
				return nil, err
			}
		}
		return v, nil
	}
}

// refusedFor tells whether v was refused for its digest under another want
// than the caller's: it is loaded again for the caller. v.err is read only
// once v is ready.
func (v *version) refusedFor(want string) bool {
	if v.want == want {
		return false
	}
	select {
	case <-v.ready:
		return v.refused
	default:
		return false
	}
}

func isDigestError(err error) bool {
	var de *sandbox.DigestError
	return errors.As(err, &de)
}

var errChanged = errors.New("file changed while being read")

// forget drops v if it is still the version for path.
func (r *registry) forget(path string, v *version) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[path] == v {
		delete(r.m, path)
	}
}

func (r *registry) load(ctx context.Context, path string, v *version) {
	data, err := readComponent(ctx, path, v.key)
	if err != nil {
		v.err = err
		return
	}
	sum := sha256.Sum256(data)
	v.digest = hex.EncodeToString(sum[:])
	// The bytes hashed are the bytes scanned, compiled and run: pinned to
	// another digest, they are refused before any of that.
	if err := sandbox.CheckDigest(path, v.want, v.digest); err != nil {
		v.err = err
		return
	}
	// Per-instance state is bounded by reading the bytes, before anything
	// is compiled or instantiated, on a cache hit too.
	if err := sandbox.CheckBinary(data); err != nil {
		v.err = err
		return
	}
	// The world comes from the bytes the parent read, not from a worker: a
	// worker's word is not trusted for what decides which entry point runs.
	if v.world, err = sandbox.WorldOf(data); err != nil {
		v.err = err
		return
	}
	start := time.Now()
	if err := r.pool.openDisk(ctx); err != nil {
		v.err = err
		return
	}
	// One pool runs one program, so one engine: the digest names the code.
	v.art = v.digest
	if a, ok := r.pool.artifact(v.art); ok {
		a.close()
		v.cached = true
		v.compile = time.Since(start)
		return
	}
	if r.pool.opts.OnCompile != nil {
		r.pool.opts.OnCompile(path)
	}
	code, err := r.pool.compile(ctx, path, data)
	if err != nil {
		v.err = err
		return
	}
	v.compile = time.Since(start)
	r.pool.storeArtifact(v.art, code)
}

// readComponent reads a component file. A file that does not look like a
// component yet, modified within the last moments, is being written in
// place: wait for it (bounded, and within ctx) rather than call it invalid.
func readComponent(ctx context.Context, path string, key sandbox.FileKey) ([]byte, error) {
	data, err := sandbox.ReadComponentFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sandbox.ErrInvalidTool, err)
	}
	if after, err := sandbox.StatKey(path); err != nil || after != key {
		return nil, errChanged
	}
	if sandbox.LooksLikeComponent(data) {
		return data, nil
	}
	if time.Since(key.ModTime()) > settle {
		return nil, fmt.Errorf("%w: %s is not a WebAssembly component (%s)", sandbox.ErrInvalidTool, filepath.Base(path), sandbox.DescribeMagic(data))
	}
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Whatever is written next changes the key: the caller starts over.
	return nil, errChanged
}
