package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFileRefusesHostileFiles: agent.toml and the CA files it names are
// read only if they are regular files within the cap. Before, /dev/zero grew
// the process to 24 GB and a FIFO blocked forever, deaf to SIGTERM.
func TestReadFileRefusesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "agent.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, make([]byte, 5000), 0o600); err != nil {
		t.Fatal(err)
	}
	exact := filepath.Join(dir, "exact.toml")
	if err := os.WriteFile(exact, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		limit      int64
		want       error  // errors.Is target; nil means success
		text       string // in the message
	}{
		{"dev zero", "/dev/zero", 4096, ErrNotRegular, "a character device"},
		{"dev null", "/dev/null", 4096, ErrNotRegular, "a character device"},
		{"fifo without writer", fifo, 4096, ErrNotRegular, "a FIFO"},
		{"directory", dir, 4096, nil, "is a directory"},
		{"proc file", "/proc/self/status", 4096, ErrNotRegular, "/proc"},
		{"over the cap", big, 4096, ErrTooLarge, "5000 bytes, the limit is 4096"},
		{"exactly the cap", exact, 4096, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			var data []byte
			var err error
			go func() {
				defer close(done)
				data, err = ReadFile(tt.path, tt.limit)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("ReadFile(%s) still blocked after 30s", tt.path)
			}
			if tt.text == "" {
				if err != nil || int64(len(data)) != tt.limit {
					t.Fatalf("ReadFile(%s) = %d bytes, %v; want %d bytes", tt.path, len(data), err, tt.limit)
				}
				return
			}
			if err == nil {
				t.Fatalf("ReadFile(%s) succeeded with %d bytes; want an error", tt.path, len(data))
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("ReadFile(%s) error %v is not %v", tt.path, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.text) || !strings.Contains(err.Error(), tt.path) {
				t.Errorf("ReadFile(%s) error %q should name the file and say %q", tt.path, err, tt.text)
			}
		})
	}
}

// TestReadFileDefaultCap: a limit of 0 means MaxFileBytes.
func TestReadFileDefaultCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(p, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFile of MaxFileBytes+1 bytes with the default cap: %v, want ErrTooLarge", err)
	}
}

// TestLoadHostileConfigFiles runs the same attacks through Load, the path
// maiden check and serve take, and checks the message a user sees.
func TestLoadHostileConfigFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "agent.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	big := filepath.Join(dir, "big.toml")
	// A valid start, then padding in a comment: only the size is wrong.
	if err := os.WriteFile(big, []byte("version = 1\n#"+strings.Repeat("x", MaxFileBytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, path, want string }{
		{"dev zero", "/dev/zero", "/dev/zero: cannot read: not a regular file (a character device)"},
		{"fifo", fifo, fifo + ": cannot read: not a regular file (a FIFO)"},
		{"directory", dir, dir + ": cannot read: is a directory"},
		{"proc", "/proc/self/environ", "/proc/self/environ: cannot read: not a regular file (a /proc file)"},
		{"too large", big, big + ": cannot read: file too large: 4194318 bytes, the limit is 4194304"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := Load(tt.path); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("Load(%s) still blocked after 30s", tt.path)
			}
			lines := errorLines(t, err)
			if len(lines) != 1 || lines[0] != tt.want {
				t.Errorf("Load(%s) = %q, want %q", tt.path, lines, tt.want)
			}
		})
	}
}

// TestCAFileHostile: a CA file named in agent.toml goes through the same
// reader, so a FIFO or an oversized bundle is an error on its line.
func TestCAFileHostile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.wasm"), []byte("\x00asm"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "ca.fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.pem"), make([]byte, MaxFileBytes+10), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, file, want string }{
		{"fifo", "ca.fifo", `agent.toml:4: tools.w.http_ca_files[0]: not a regular file: "ca.fifo"`},
		{"too large", "big.pem", `agent.toml:4: tools.w.http_ca_files[0]: cannot read "big.pem": file too large: 4194314 bytes, the limit is 4194304`},
		{"device", "/dev/zero", `agent.toml:4: tools.w.http_ca_files[0]: not a regular file: "/dev/zero"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "version = 1\n[tools.w]\npath = \"w.wasm\"\nhttp_ca_files = [\"" + tt.file + "\"]\nhttp_allow = [\"api.example.com\"]\n"
			_, err := Parse("agent.toml", []byte(src), dir)
			lines := errorLines(t, err)
			if len(lines) != 1 || lines[0] != tt.want {
				t.Errorf("got %q, want %q", lines, tt.want)
			}
		})
	}
}

func TestMaxInputBytes(t *testing.T) {
	tests := []struct {
		name, src string
		want      int64
		err       string
	}{
		{"default", "version = 1\n", DefaultMaxInputBytes, ""},
		{"set", "version = 1\nmax_input_bytes = 4096\n", 4096, ""},
		{"smallest", "version = 1\nmax_input_bytes = 1024\n", 1024, ""},
		{"largest", "version = 1\nmax_input_bytes = 67108864\n", 64 << 20, ""},
		{"too small", "version = 1\nmax_input_bytes = 1023\n", 0,
			"agent.toml:2: max_input_bytes: must be an integer in 1024..67108864, got 1023"},
		{"too large", "version = 1\nmax_input_bytes = 67108865\n", 0,
			"agent.toml:2: max_input_bytes: must be an integer in 1024..67108864, got 67108865"},
		{"string", "version = 1\nmax_input_bytes = \"1MiB\"\n", 0,
			`agent.toml:2: max_input_bytes: must be an integer in 1024..67108864, got string "1MiB"`},
		{"inside a tool table", "version = 1\n[tools.w]\npath = \"w.wasm\"\nmax_input_bytes = 4096\n", 0,
			"agent.toml:4: tools.w.max_input_bytes: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "w.wasm"), []byte("\x00asm"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Parse("agent.toml", []byte(tt.src), dir)
			if tt.err != "" {
				if err == nil {
					t.Fatalf("Parse succeeded; want %q", tt.err)
				}
				if !strings.HasPrefix(errorLines(t, err)[0], tt.err) {
					t.Fatalf("Parse error %q, want prefix %q", errorLines(t, err), tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.MaxInputBytes(); got != tt.want {
				t.Errorf("MaxInputBytes() = %d, want %d", got, tt.want)
			}
		})
	}
}
