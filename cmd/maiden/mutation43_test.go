package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/oci"
	"github.com/maiden-run/maiden/internal/testkit"
)

// m43Mkfifo makes a FIFO at path, or skips the test where it cannot.
func m43Mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
}

// TestMutation43ClientConfigWriteRefusesAFIFO: another user (or a
// workspace) can put a FIFO where -write's file goes. -write refuses what
// is not a regular file, naming it, and leaves it there: reading it would
// wait for a writer, and the rename would replace it.
func TestMutation43ClientConfigWriteRefusesAFIFO(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	path := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	m43Mkfifo(t, path)
	// A writer that opens the FIFO once a reader does and closes it at
	// once (the reader then sees an empty file): a -write that reads the
	// FIFO goes on instead of waiting for ever. At the end the writer is
	// let go by opening the read end without blocking.
	opened := make(chan struct{})
	go func() {
		defer close(opened)
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	}()
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			<-opened
			f.Close()
		}
		<-opened
	})
	r := cli(t, "", "client", "config", "claude", "-config", cfg, "-write", "-file", path)
	if r.code != exitUsage || !strings.Contains(r.stderr, "not a regular file") {
		t.Errorf("-write to a FIFO: exit %d, stdout %q, stderr %q; want exit 2, \"not a regular file\"", r.code, r.stdout, r.stderr)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO at the file's place after -write: %v, %v; want it left there", fi.Mode(), err)
	}
}

// TestMutation43ClientConfigWriteSizeBound: a client file one byte past
// maxClientFile is refused before it is read, naming the bound, and left
// as it was; one of exactly maxClientFile bytes is taken.
func TestMutation43ClientConfigWriteSizeBound(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	for _, size := range []int{maxClientFile + 1, maxClientFile} {
		path := filepath.Join(t.TempDir(), "claude_desktop_config.json")
		head, tail := `{"pad": "`, `"}`
		body := head + strings.Repeat("a", size-len(head)-len(tail)) + tail
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r := cli(t, "", "client", "config", "claude", "-config", cfg, "-write", "-file", path)
		if size > maxClientFile {
			if r.code != exitUsage || !strings.Contains(r.stderr, "more than a client config file should be") {
				t.Errorf("-write to a file of %d bytes (the bound is %d): exit %d, stderr %q; want exit 2 naming the bound", size, maxClientFile, r.code, r.stderr)
			}
			if b, _ := os.ReadFile(path); string(b) != body {
				t.Errorf("the file of %d bytes was changed", size)
			}
		} else if r.code != exitOK {
			t.Errorf("-write to a file of exactly %d bytes: exit %d, stderr %q; want it taken", size, r.code, r.stderr)
		}
	}
}

// TestMutation43ClientConfigNameRefusesDEL: -name is written into the
// client's file and printed: DEL (0x7f), like the C0 controls, is refused.
func TestMutation43ClientConfigNameRefusesDEL(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	for _, name := range []string{"a\x7fb", "a\x1fb"} {
		r := cli(t, "", "client", "config", "claude", "-config", cfg, "-name", name)
		if r.code != exitUsage || !strings.Contains(r.stderr, "must be printable") || strings.Contains(r.stdout, name) {
			t.Errorf("-name %q: exit %d, stdout %q, stderr %q; want exit 2, \"must be printable\", nothing printed", name, r.code, r.stdout, r.stderr)
		}
	}
}

// TestMutation43ClientConfigWriteNeedsItsBackup: -write replaces a file
// only after its backup is written; when no backup can be made (every
// backup name of the second taken: another user can make them beside a
// file in a shared directory), nothing is written.
func TestMutation43ClientConfigWriteNeedsItsBackup(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	path := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	const orig = `{"mcpServers": {}}`
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every name writeBackup tries, for the seconds around the run.
	now := time.Now().UTC()
	for s := -2; s <= 30; s++ {
		stem := path + "." + now.Add(time.Duration(s)*time.Second).Format("20060102-150405")
		for i := 1; i < 100; i++ {
			name := stem + ".bak"
			if i > 1 {
				name = fmt.Sprintf("%s-%d.bak", stem, i)
			}
			if err := os.WriteFile(name, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := cli(t, "", "client", "config", "claude", "-config", cfg, "-write", "-file", path)
	if time.Since(now) > 25*time.Second {
		t.Skip("the run outlasted the backup names made for it")
	}
	if r.code != exitUsage || !strings.Contains(r.stderr, "cannot write a backup, so nothing was written") {
		t.Errorf("-write with no backup name free: exit %d, stdout %q, stderr %q; want exit 2, \"cannot write a backup, so nothing was written\"", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Errorf("the file was replaced without a backup: %q", b)
	}
}

// TestMutation43CompletionReadsAgentTOMLBounded: completing a tool name
// reads agent.toml as every reader of it does (config.ReadFile): a regular
// file of at most config.MaxFileBytes. A workspace's agent.toml past the
// bound (or /dev/zero, or a FIFO behind the name) is not read whole on
// every TAB: no candidate comes from it.
func TestMutation43CompletionReadsAgentTOMLBounded(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	body := "version = 1\n[tools.big]\npath = \"big.wasm\"\n# "
	body += strings.Repeat("x", config.MaxFileBytes+1-len(body))
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "__complete", "call", "-config", cfg, "")
	if r.code != exitOK || r.stdout != "words\n" {
		t.Errorf("completion of tools from an agent.toml of %d bytes (the bound is %d): exit %d, %q; want no candidate (%q)", len(body), config.MaxFileBytes, r.code, r.stdout, "words\n")
	}
	// One byte less is read.
	if err := os.WriteFile(cfg, []byte(body[:len(body)-1]), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "", "__complete", "call", "-config", cfg, ""); r.stdout != "words\nbig\n" {
		t.Errorf("completion of tools from an agent.toml of %d bytes: %q; want %q", len(body)-1, r.stdout, "words\nbig\n")
	}
}

// TestMutation43ClientConfigTokenInputInAKey: the input maiden's token is
// asked with is looked for in another server's keys too (mentions: "keys
// included"): a file whose other entry names ${input:maiden-token} as a
// key (raw or JSON-escaped) is refused, naming the entry, and left as it
// was.
func TestMutation43ClientConfigTokenInputInAKey(t *testing.T) {
	t.Parallel()
	for _, content := range []string{
		`{"servers": {"keyed": {"type": "stdio", "command": "env", "env": {"${input:maiden-token}": "x"}}}}`,
		`{"servers": {"keyed": {"type": "stdio", "command": "env", "env": {"\u0024{input:maiden-token}": "x"}}}}`,
	} {
		path := filepath.Join(t.TempDir(), "mcp.json")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		r := cli(t, "", "client", "config", "vscode", "-url", "http://127.0.0.1:8700/mcp", "-auth-token-env", "MAIDEN_TOKEN", "-write", "-file", path)
		if r.code != exitUsage || !strings.Contains(r.stderr, `server "keyed" already names ${input:maiden-token}`) {
			t.Errorf("-write beside a server whose key is ${input:maiden-token} (%s): exit %d, stderr %q; want exit 2 naming server \"keyed\"", content, r.code, r.stderr)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Errorf("the file was changed: %q", b)
		}
	}
}

// TestMutation43PullEscapesTheRegistrysError: a registry's error answer
// (its message, which go-containerregistry quotes) reaches the operator's
// terminal through maiden pull's refusal: escaped, not as the registry
// wrote it.
func TestMutation43PullEscapesTheRegistrysError(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	digest := "sha256:" + strings.Repeat("5", 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"gone\u001b]0;owned\u0007\u001b[2J\nmaiden: pulled"}]}`)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(cfg, []byte("version = 1\n[tools.echo]\npath = \"oci://"+host+"/hostile/echo@"+digest+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "pull", "-config", cfg, "-timeout", "30s")
	if r.code != exitUsage || !strings.Contains(r.stderr, `gone\x1b]0;owned\a\x1b[2J`) {
		t.Fatalf("pull from a registry answering with escapes: exit %d, stderr %q; want exit 2 quoting the message escaped", r.code, r.stderr)
	}
	if strings.ContainsAny(r.stderr, "\x1b\a") || strings.Contains(r.stderr, "\nmaiden: pulled") {
		t.Errorf("the registry's message reached the terminal raw: stderr %q", r.stderr)
	}
}

// TestMutation43PullVerifiesWhatItHas: maiden pull counts a component in
// the store as had only if it verifies as agent.toml now asks: a copy
// pulled unsigned does not satisfy a tool that now names a key (the
// registry has no signature for it, so the pull fails).
func TestMutation43PullVerifiesWhatItHas(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	host, _ := loopbackRegistry(t)
	echo, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := oci.Push(context.Background(), oci.Ref{Registry: host, Repository: "m43/echo", Tag: "v1"}, echo, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	tool := "version = 1\n[tools.echo]\npath = \"" + p.String() + "\"\n"
	if err := os.WriteFile(cfg, []byte(tool), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "", "pull", "-config", cfg); r.code != exitOK {
		t.Fatalf("pull of the unsigned component: %+v", r)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cosign.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(tool+"verify = { key = \"cosign.pub\" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "pull", "-config", cfg)
	if r.code != exitUsage || strings.Contains(r.stdout, "have ") {
		t.Errorf("pull of a tool that now names a key, its unsigned copy in the store: exit %d, stdout %q, stderr %q; want exit 2, the copy not taken as had", r.code, r.stdout, r.stderr)
	}
}

// TestMutation43PinHintEscapesTheRegistrysError: maiden pull of a file
// whose oci:// path names a tag only tries to resolve the tag to print the
// pin; the registry's refusal it quotes is escaped.
func TestMutation43PinHintEscapesTheRegistrysError(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"gone\u001b]0;owned\u0007\u001b[2J\nmaiden: pinned"}]}`)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(cfg, []byte("version = 1\n[tools.echo]\npath = \"oci://"+host+"/hostile/echo:v1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "pull", "-config", cfg)
	if r.code != exitUsage || !strings.Contains(r.stderr, "cannot resolve the tag to pin it") || !strings.Contains(r.stderr, `gone\x1b]0;owned\a\x1b[2J`) {
		t.Fatalf("pull of a tag-only path, the registry answering with escapes: exit %d, stderr %q; want exit 2, the hint quoting the message escaped", r.code, r.stderr)
	}
	if strings.ContainsAny(r.stderr, "\x1b\a") || strings.Contains(r.stderr, "\nmaiden: pinned") {
		t.Errorf("the registry's message reached the terminal raw: stderr %q", r.stderr)
	}
}
