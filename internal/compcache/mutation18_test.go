package compcache

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// shortWriter takes at most max bytes of each write and says nothing of
// the rest, as a writer breaking io.Writer's contract would.
type shortWriter struct {
	buf bytes.Buffer
	max int
}

func (w *shortWriter) Write(p []byte) (int, error) {
	if len(p) > w.max {
		p = p[:w.max]
	}
	return w.buf.Write(p)
}

// flakyWriter fails its first write and takes every later one.
type flakyWriter struct {
	buf    bytes.Buffer
	failed bool
}

var errFlaky = errors.New("no space, this once")

func (w *flakyWriter) Write(p []byte) (int, error) {
	if !w.failed {
		w.failed = true
		return 0, errFlaky
	}
	return w.buf.Write(p)
}

// TestLoadToDestinationThatDropsBytes: LoadTo returns no error only when
// its destination holds the whole artifact. A destination that takes part
// of a write without saying why (io.ErrShortWrite), or that fails once and
// then takes the rest (the artifact with a hole), is an error, the
// destination's, and the entry, intact, stays.
func TestLoadToDestinationThatDropsBytes(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	put(t, c)

	short := &shortWriter{max: 100}
	n, err := c.LoadTo(key, short)
	if !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("LoadTo to a writer taking 100 bytes of each write: %d bytes, %v; want io.ErrShortWrite (it holds %d of %d bytes)",
			n, err, short.buf.Len(), len(artifact))
	}
	flaky := &flakyWriter{}
	n, err = c.LoadTo(key, flaky)
	if !errors.Is(err, errFlaky) {
		t.Errorf("LoadTo to a writer that failed once: %d bytes, %v; want its error (it holds %d of %d bytes, the first write lost)",
			n, err, flaky.buf.Len(), len(artifact))
	}
	var buf bytes.Buffer
	if n, err := c.LoadTo(key, &buf); err != nil || n != int64(len(artifact)) || !bytes.Equal(buf.Bytes(), artifact) {
		t.Errorf("the entry after the destinations failed: %d bytes, %v; want it whole", n, err)
	}
}

// TestLoadToKeepsNoDescriptor: LoadTo closes the artifact it read, whether
// the entry matched, the destination failed or the entry was refused.
// (Not parallel: it counts this process's descriptors.)
func TestLoadToKeepsNoDescriptor(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	art, _ := put(t, c)
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := count()
	for range 10 {
		if _, err := c.LoadTo(key, io.Discard); err != nil {
			t.Fatal(err)
		}
		if _, err := c.LoadTo(key, &flakyWriter{}); !errors.Is(err, errFlaky) {
			t.Fatal(err)
		}
	}
	if after := count(); after != before {
		t.Errorf("%d descriptors open after 20 loads, %d before", after, before)
	}
	b := bytes.Clone(artifact)
	b[len(b)/2] ^= 1
	overwrite(t, art, b)
	before = count()
	if _, err := c.LoadTo(key, io.Discard); !errors.Is(err, ErrRefused) {
		t.Fatalf("LoadTo of a changed artifact: %v, want ErrRefused", err)
	}
	if after := count(); after != before {
		t.Errorf("%d descriptors open after a refused load, %d before", after, before)
	}
}
