package lookupname

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// useHosts points For at a hosts file holding text for the test.
func useHosts(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	old := hostsPath
	hostsPath = p
	t.Cleanup(func() { hostsPath = old })
	return p
}

// TestFor: a name of more than one label is asked as the absolute name
// (what keeps a resolv.conf search list from answering it), unless the
// hosts file lists it (Go's resolver would not find it absolute); one
// label and IP literals as written.
func TestFor(t *testing.T) {
	useHosts(t, `# a comment line
127.0.0.1	localhost
127.0.1.1	Build.Internal.  mirror.corp # an alias, a comment
::1	ip6-localhost ip6-loopback
fe80::1%lo	linklocal.test
not-an-address	bogus.example.com
10.0.0.1
`)
	for _, tt := range []struct{ host, want string }{
		{"api.example.com", "api.example.com."},
		{"API.Example.COM.", "api.example.com."},
		{"cdn.registry.test", "cdn.registry.test."},
		{"build.internal", "build.internal"},        // listed (written with capitals and a trailing dot)
		{"mirror.corp", "mirror.corp"},              // an alias on the line
		{"linklocal.test", "linklocal.test"},        // an address with a zone is an address
		{"bogus.example.com", "bogus.example.com."}, // the line's "address" is not one
		{"localhost", "localhost"},                  // one label
		{"minio", "minio"},
		{"127.0.0.1", "127.0.0.1"},
		{"::1", "::1"},
		{"", ""},
	} {
		if got := For(tt.host); got != tt.want {
			t.Errorf("For(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

// TestForRereadsTheHostsFile: a name added to the hosts file is asked as
// written once the file is read again (after hostsRecheck, as Go's
// resolver rereads it), and one removed is asked absolute again.
func TestForRereadsTheHostsFile(t *testing.T) {
	p := useHosts(t, "127.0.0.1 localhost\n")
	if got := For("svc.local.test"); got != "svc.local.test." {
		t.Fatalf("before the edit: For = %q", got)
	}
	if err := os.WriteFile(p, []byte("127.0.0.1 localhost\n127.0.0.2 svc.local.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The file is checked again after hostsRecheck; move the last check
	// back rather than wait.
	expire := func() {
		hostsFile.mu.Lock()
		hostsFile.checked = time.Now().Add(-hostsRecheck)
		hostsFile.mtime = time.Time{} // a write within the same clock tick keeps the mtime
		hostsFile.mu.Unlock()
	}
	expire()
	if got := For("svc.local.test"); got != "svc.local.test" {
		t.Fatalf("after adding it: For = %q, want it as written", got)
	}
	if err := os.WriteFile(p, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expire()
	if got := For("svc.local.test"); got != "svc.local.test." {
		t.Fatalf("after removing it: For = %q, want it absolute", got)
	}
}

// TestForMissingHostsFile: no hosts file lists no name; every name of
// more than one label is asked absolute.
func TestForMissingHostsFile(t *testing.T) {
	old := hostsPath
	hostsPath = filepath.Join(t.TempDir(), "none")
	t.Cleanup(func() { hostsPath = old })
	if got := For("build.internal"); got != "build.internal." {
		t.Fatalf("For = %q, want the absolute name", got)
	}
}

// TestForFindsWhatTheSystemHostsFileLists: every name of the machine's
// own /etc/hosts, asked as For says, is answered by Go's resolver from the
// file, with the file's address (the full suite's failure when every name
// was made absolute: "lookup localhost. on ...:53: no such host"). It
// reads the hosts file and asks nothing of DNS unless the file's own
// answer is missing: a resolver that dials is refused by the test.
func TestForFindsWhatTheSystemHostsFileLists(t *testing.T) {
	b, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Skipf("no /etc/hosts: %v", err)
	}
	names := parseHosts(b)
	if len(names) == 0 {
		t.Skip("/etc/hosts lists no name")
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		t.Errorf("the resolver dialled %s %s: a hosts-file name went to DNS", network, address)
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrPermission}
	}}
	for n := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := r.LookupNetIP(ctx, "ip", For(n))
		cancel()
		if err != nil || len(addrs) == 0 {
			t.Errorf("lookup of %q as %q: %v %v", n, For(n), addrs, err)
		}
	}
}

// expireHostsCheck moves the last check of the hosts file back by
// hostsRecheck, so that the next For looks at the file again (its mtime
// and size decide whether it is read).
func expireHostsCheck() {
	hostsFile.mu.Lock()
	hostsFile.checked = time.Now().Add(-hostsRecheck)
	hostsFile.mu.Unlock()
}

// TestForHostsFileGoneOrUnreadable: once the hosts file that listed a name
// is removed, or can no longer be read (a directory in its place), the
// name is asked absolute again: the names of a file that is no longer
// there are not kept.
func TestForHostsFileGoneOrUnreadable(t *testing.T) {
	for _, gone := range []func(p string) error{
		os.Remove,
		func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o755)
		},
	} {
		p := useHosts(t, "127.0.0.2 svc.local.test\n")
		if got := For("svc.local.test"); got != "svc.local.test" {
			t.Fatalf("listed: For = %q, want it as written", got)
		}
		if err := gone(p); err != nil {
			t.Fatal(err)
		}
		expireHostsCheck()
		if got := For("svc.local.test"); got != "svc.local.test." {
			t.Errorf("after the hosts file went (%s): For = %q, want the absolute name", p, got)
		}
	}
}

// TestForRereadsAFileOfTheSameMtime: a hosts file rewritten within the
// same clock tick (the same mtime) but of another size is read again.
func TestForRereadsAFileOfTheSameMtime(t *testing.T) {
	p := useHosts(t, "127.0.0.1 localhost\n")
	if got := For("svc.local.test"); got != "svc.local.test." {
		t.Fatalf("before the edit: For = %q", got)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("127.0.0.1 localhost\n127.0.0.2 svc.local.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	expireHostsCheck()
	if got := For("svc.local.test"); got != "svc.local.test" {
		t.Fatalf("after adding it (same mtime, another size): For = %q, want it as written", got)
	}
}

// TestForIgnoresNamesInComments: a name after a # on an address's line is
// a comment, not a listed name: it is asked absolute.
func TestForIgnoresNamesInComments(t *testing.T) {
	useHosts(t, "127.0.0.1 localhost # api.example.com\n127.0.0.2 mirror.corp#cdn.example.com\n")
	for _, tt := range []struct{ host, want string }{
		{"api.example.com", "api.example.com."},
		{"cdn.example.com", "cdn.example.com."},
		{"mirror.corp", "mirror.corp"},
	} {
		if got := For(tt.host); got != tt.want {
			t.Errorf("For(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}
