// Package lookupname decides the name maiden asks the system resolver for
// a destination it has checked: the absolute name, out of reach of
// resolv.conf's search list, unless only the relative one can be found.
// It is the one place internal/egress (a tool's http-fetch, web_fetch, the
// CONNECT proxy) and internal/oci (where a registry sends maiden) decide it.
package lookupname

import (
	"bufio"
	"bytes"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// For is the name to ask the system resolver for host, a name
// already checked (lowercase, no trailing dot): the absolute name
// (host + "."), so that resolv.conf's search list is never tried first.
// Under Kubernetes' ndots:5 and `search NS.svc.cluster.local`, a relative
// lookup of api.example.com is answered first by
// api.example.com.NS.svc.cluster.local, a name anyone who can create a
// service or record in that domain picks.
//
// Two kinds of name are asked as written, because the absolute form would
// not find them: a name the hosts file (/etc/hosts) lists, since Go's
// resolver, pure Go and cgo alike, does not look an absolute name up in
// the hosts file (localhost. and the machine's own name went to DNS and
// failed, measured here); and a name of one label (minio), which only the
// search list can complete and which an operator who allowed it meant that
// way. Neither is a name a search domain can shadow: the hosts file is read
// before DNS, and a one-label name has nothing to expand but through the
// search list the operator set.
//
// An IP literal is returned as it is (it is never looked up).
func For(host string) string {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "" || !strings.Contains(h, ".") {
		return host
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return host
	}
	if hostsFile.has(h) {
		return h
	}
	return h + "."
}

// hostsPath is the hosts file For reads (a variable for tests).
var hostsPath = "/etc/hosts"

// hostsFile is the set of names the hosts file lists, read again when the
// file changes (checked at most every hostsRecheck, as Go's resolver does).
var hostsFile hostsNames

const hostsRecheck = 5 * time.Second

type hostsNames struct {
	mu      sync.Mutex
	path    string
	checked time.Time
	mtime   time.Time
	size    int64
	names   map[string]bool
}

func (h *hostsNames) has(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if h.path != hostsPath || now.Sub(h.checked) >= hostsRecheck || now.Before(h.checked) {
		h.refresh(now)
	}
	return h.names[name]
}

// refresh reads the file again if it changed. A file that cannot be read
// lists no name: every name with a dot is then asked as absolute, the safe
// side (a name the file would have answered fails to resolve, loudly).
func (h *hostsNames) refresh(now time.Time) {
	h.checked = now
	fi, err := os.Stat(hostsPath)
	if err != nil {
		h.path, h.names = hostsPath, nil
		return
	}
	if h.path == hostsPath && h.names != nil && fi.ModTime().Equal(h.mtime) && fi.Size() == h.size {
		return
	}
	b, err := os.ReadFile(hostsPath)
	if err != nil {
		h.path, h.names = hostsPath, nil
		return
	}
	h.path, h.mtime, h.size = hostsPath, fi.ModTime(), fi.Size()
	h.names = parseHosts(b)
}

// parseHosts returns the names a hosts file lists: on each line, after a
// valid address, every field up to a comment, lowercased and without a
// trailing dot (as Go's resolver reads the file).
func parseHosts(b []byte) map[string]bool {
	names := map[string]bool{}
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 0, 4096), 1<<20)
	for s.Scan() {
		line := s.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if _, err := netip.ParseAddr(f[0]); err != nil {
			continue
		}
		for _, n := range f[1:] {
			names[strings.ToLower(strings.TrimSuffix(n, "."))] = true
		}
	}
	return names
}
