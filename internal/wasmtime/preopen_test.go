package wasmtime

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goToolFixture links both versions of maiden's host interface (the Go SDK
// imports 0.2.0); neither function is used by the tool here.
func goToolFixture(t *testing.T) *fixture {
	f := newFixture(t, nil)
	err := f.linker.DefineInstance("maiden:tool/host@0.2.0", map[string]HostFunc{
		"log":        func(c *Caller, p []Val) ([]Val, error) { return nil, nil },
		"http-fetch": func(c *Caller, p []Val) ([]Val, error) { return nil, errors.New("no network in this test") },
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fsCall runs the fsprobe tool once in a fresh store with dirs preopened.
func fsCall(t *testing.T, f *fixture, c *Component, dirs []Preopen, in map[string]any) (string, bool) {
	t.Helper()
	b, _ := json.Marshal(in)
	v, _, err := f.call(t, c, &StoreOptions{MemoryLimit: 256 << 20, Preopens: dirs}, "execute", String(string(b)))
	if err != nil {
		t.Fatalf("fsprobe %s: %v", b, err)
	}
	if v.Kind != KindResult || v.Payload == nil {
		t.Fatalf("fsprobe %s: unexpected result %+v", b, v)
	}
	out := v.Payload.Str
	if v.OK {
		// The SDK returns the tool's string as JSON.
		if err := json.Unmarshal([]byte(out), &out); err != nil {
			t.Fatalf("fsprobe %s: output %q: %v", b, v.Payload.Str, err)
		}
	}
	return out, v.OK
}

func TestPreopenPermissions(t *testing.T) {
	f := goToolFixture(t)
	c := f.component(t, "go/fsprobe")
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "in.txt"), []byte("hello from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirs := []Preopen{{HostPath: ro, GuestPath: "/ro"}, {HostPath: rw, GuestPath: "/rw", Write: true}}

	if out, ok := fsCall(t, f, c, dirs, map[string]any{"op": "read", "path": "/ro/in.txt"}); !ok || out != "hello from the host" {
		t.Errorf("read in a read-only preopen = %q, ok %v", out, ok)
	}
	if out, ok := fsCall(t, f, c, dirs, map[string]any{"op": "write", "path": "/ro/in.txt", "content": "x"}); ok {
		t.Errorf("write in a read-only preopen succeeded: %q", out)
	}
	if out, ok := fsCall(t, f, c, dirs, map[string]any{"op": "write", "path": "/ro/new.txt", "content": "x"}); ok {
		t.Errorf("create in a read-only preopen succeeded: %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "in.txt")); string(b) != "hello from the host" {
		t.Errorf("the read-only file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ro, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file appeared in the read-only directory: %v", err)
	}
	if out, ok := fsCall(t, f, c, dirs, map[string]any{"op": "write", "path": "/rw/out.txt", "content": "from the guest"}); !ok {
		t.Errorf("write in a read-write preopen failed: %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "out.txt")); err != nil || string(b) != "from the guest" {
		t.Errorf("the host sees %q, %v", b, err)
	}
	// Without preopens the guest sees no filesystem at all.
	if out, ok := fsCall(t, f, c, nil, map[string]any{"op": "read", "path": "/ro/in.txt"}); ok {
		t.Errorf("read without preopens succeeded: %q", out)
	}
	if out, ok := fsCall(t, f, c, nil, map[string]any{"op": "list", "path": "/"}); ok {
		t.Errorf("list / without preopens succeeded: %q", out)
	}
}

func TestPreopenErrors(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Preopen{
		"missing":      {HostPath: filepath.Join(dir, "nope"), GuestPath: "/x"},
		"a file":       {HostPath: file, GuestPath: "/x"},
		"NUL in host":  {HostPath: dir + "\x00/etc", GuestPath: "/x"},
		"NUL in guest": {HostPath: dir, GuestPath: "/x\x00y"},
		"no guest":     {HostPath: dir},
	} {
		s, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20, Preopens: []Preopen{p}})
		if err == nil {
			s.Close()
			t.Errorf("%s: store created", name)
			continue
		}
		if strings.Contains(name, "NUL") || name == "no guest" {
			continue
		}
		if !strings.Contains(err.Error(), p.HostPath) {
			t.Errorf("%s: error %q does not name the directory", name, err)
		}
	}
	n := f.engine.stores.Load()
	if n != 0 {
		t.Errorf("%d stores still counted after failed creations", n)
	}
}
