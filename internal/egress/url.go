package egress

import (
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/maiden-run/maiden/internal/netguard"
)

// maxURLLen bounds the URL a tool may pass; longer ones are refused rather
// than truncated.
const maxURLLen = 8 << 10

// target is a normalised request URL. It is the only source the outgoing
// request is built from.
type target struct {
	scheme string     // "https" or "http"
	host   string     // lowercase LDH name, or an IP in netip String() form
	ip     netip.Addr // valid iff host is an IP literal
	port   uint16
	path   string // escaped, starts with "/"
	query  string // escaped, without '?'; "" for none
}

func (t target) defaultPort() bool {
	return t.scheme == "https" && t.port == 443 || t.scheme == "http" && t.port == 80
}

// hostPort is the authority sent on the wire and used as the connection
// pool key: the checked host, bracketed if IPv6, with the port unless it is
// the scheme's default.
func (t target) hostPort() string {
	h := t.host
	if t.ip.Is6() {
		h = "[" + h + "]"
	}
	if t.defaultPort() {
		return h
	}
	return h + ":" + strconv.Itoa(int(t.port))
}

// url builds the outgoing URL from the normalised parts only.
func (t target) url() *url.URL {
	u := &url.URL{Scheme: t.scheme, Host: t.hostPort(), RawPath: t.path, RawQuery: t.query}
	// path came from EscapedPath, so it always unescapes.
	u.Path, _ = url.PathUnescape(t.path)
	return u
}

// String is the normalised URL; normalizeURL(t.String()) returns t.
func (t target) String() string {
	s := t.scheme + "://" + t.hostPort() + t.path
	if t.query != "" {
		s += "?" + t.query
	}
	return s
}

// normalizeURL parses a tool's URL and returns its canonical parts, or a
// denial naming what is wrong. It knows nothing of any policy.
func normalizeURL(raw string) (target, Ruling) {
	if len(raw) > maxURLLen {
		return target{}, deny(RuleURL, "URL is %d bytes long, the maximum is %d", len(raw), maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, deny(RuleURL, "URL %s does not parse: %s", quote(shownURL(raw)), urlErrText(err))
	}
	if u.Scheme == "" {
		return target{}, deny(RuleURL, "URL %s is not absolute; want https://host/path", quote(shownURL(raw)))
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return target{}, deny(RuleHTTPSRequired, "scheme %s is not allowed; http-fetch speaks https (plain http only to loopback)", quote(u.Scheme))
	}
	if u.Opaque != "" || len(raw) < len(u.Scheme)+3 || !strings.EqualFold(raw[:len(u.Scheme)+3], u.Scheme+"://") {
		return target{}, deny(RuleURL, "URL %s is not of the form %s://host/path", quote(shownURL(raw)), u.Scheme)
	}
	if u.User != nil {
		return target{}, deny(RuleUserinfo, "URL %s contains user info before '@'; the host is what follows it, and credentials are attached by name", quote(shownURL(raw)))
	}
	// The authority as written must be exactly what the parser took as the
	// host: url.Parse decodes escapes in hosts, so "%c3%a4pi" would
	// otherwise be checked as something the tool never wrote.
	auth := raw[len(u.Scheme)+3:]
	if i := strings.IndexAny(auth, "/?#"); i >= 0 {
		auth = auth[:i]
	}
	if strings.Contains(auth, "%") {
		return target{}, deny(RuleHostSyntax, "host %s contains a percent-escape; write the host plainly", quote(auth))
	}
	if auth != u.Host {
		// Unreachable with today's net/url once '@' and '%' are refused;
		// kept so a parser change fails closed.
		return target{}, deny(RuleURL, "URL %s does not parse unambiguously", quote(shownURL(raw)))
	}
	if u.Host == "" {
		return target{}, deny(RuleURL, "URL %s has no host", quote(shownURL(raw)))
	}

	t := target{scheme: u.Scheme}
	if d := t.setHost(u); !d.Allow {
		return target{}, d
	}
	if d := t.setPort(u); !d.Allow {
		return target{}, d
	}
	// The path as written (url.Parse keeps it in RawPath unless it equals
	// the escaped Path), with escapes kept as they are: "%2F" is not "/".
	rawPath := u.RawPath
	if rawPath == "" {
		rawPath = u.EscapedPath()
	}
	if rawPath == "" {
		rawPath = "/"
	}
	if !strings.HasPrefix(rawPath, "/") {
		return target{}, deny(RuleURL, "path of URL %s does not start with '/'", quote(shownURL(raw)))
	}
	var d Ruling
	if t.path, d = escapeRaw(rawPath, "path", pathByteOK); !d.Allow {
		return target{}, d
	}
	if t.query, d = escapeRaw(u.RawQuery, "query", queryByteOK); !d.Allow {
		return target{}, d
	}
	return t, allowed
}

// CheckedHost returns the authority of raw as the gate normalises, checks
// and sends it: the host lowercased, without a trailing dot, an IP literal
// in its canonical form (bracketed if IPv6), with the port unless it is
// the scheme's default. ok is false when the gate refuses raw's syntax. A
// record of a request names the host the gate decided about, not the
// tool's spelling of it ("API.Example.COM.:443", "[0:0::1]").
func CheckedHost(raw string) (authority string, ok bool) {
	t, d := normalizeURL(raw)
	if !d.Allow {
		return "", false
	}
	return t.hostPort(), true
}

// shownURL is raw as a refusal quotes it: without its query and fragment,
// and with the password of any user info masked (as url.URL.Redacted
// does). A refusal is the reason of an audit event, which never holds the
// query string (a caller's own keys travel there), and web_fetch's error,
// which reaches the call's audit record.
func shownURL(raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	auth, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		auth, path = rest[:i], rest[i:]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return raw
	}
	if user, _, hasPass := strings.Cut(auth[:at], ":"); hasPass {
		auth = user + ":xxxxx" + auth[at:]
	}
	return scheme + "://" + auth + path
}

func (t *target) setHost(u *url.URL) Ruling {
	name := u.Hostname()
	for i := 0; i < len(name); i++ {
		// Before anything lowercases it: strings.ToLower maps some
		// non-ASCII runes (the Kelvin sign) onto ASCII letters.
		if name[i] >= 0x80 {
			return deny(RuleHostSyntax, "host %s contains non-ASCII characters; write internationalised names in punycode (\"xn--...\")", quote(name))
		}
	}
	if strings.Contains(name, "*") {
		return deny(RuleHostSyntax, "host %s contains '*'", quote(name))
	}
	// One canonicaliser for allowlist patterns and request hosts, so the two
	// can be compared with ==.
	h, why := normalizeHostPattern(name)
	if why != "" {
		return deny(RuleHostSyntax, "host %s is not a plain host name or IP address: %s", quote(name), why)
	}
	bracketed := strings.HasPrefix(u.Host, "[")
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Is6() != bracketed || a.Zone() != "" {
			return deny(RuleHostSyntax, "host %s is not a canonical IP literal", quote(name))
		}
		t.ip = a
	} else if bracketed {
		return deny(RuleHostSyntax, "host %s is not a canonical IP literal", quote(name))
	}
	t.host = h
	return allowed
}

func (t *target) setPort(u *url.URL) Ruling {
	p := u.Port()
	if p == "" {
		if strings.HasSuffix(u.Host, ":") {
			return deny(RuleURL, "URL has an empty port after %s", quote(u.Host))
		}
		t.port = 443
		if t.scheme == "http" {
			t.port = 80
		}
		return allowed
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 || p[0] == '0' {
		return deny(RuleURL, "port %s is not a decimal number from 1 to 65535 without leading zeros", quote(p))
	}
	t.port = uint16(n)
	return allowed
}

func urlErrText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// escapeRaw percent-escapes bytes that may not appear raw in a path or
// query (space, controls, non-ASCII, and the delimiters RFC 3986 excludes),
// keeps existing escapes as they are, and refuses a '%' that does not start
// an escape, whose meaning would be a guess.
func escapeRaw(s, what string, ok func(byte) bool) (string, Ruling) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", deny(RuleURL, "%s contains a '%%' that does not start a %%XX escape", what)
			}
			b.WriteByte(c)
		case ok(c):
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(upperhex[c>>4])
			b.WriteByte(upperhex[c&15])
		}
	}
	return b.String(), allowed
}

const upperhex = "0123456789ABCDEF"

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// pathByteOK reports whether c may appear unescaped in a path: RFC 3986
// pchar (unreserved, sub-delims, ':' and '@') and '/'.
func pathByteOK(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0
}

// queryByteOK reports whether c may appear unescaped in a query: a path
// byte or '?'.
func queryByteOK(c byte) bool { return c == '?' || pathByteOK(c) }

// checkTarget applies the tool's policy to a normalised URL: allowlist,
// scheme, port. Nothing here touches the network.
func (p *Policy) checkTarget(t target) Ruling {
	if !p.allowsHost(t.host) {
		switch {
		case len(p.allow) == 0:
			return deny(RuleAllowlist, "host %s is not reachable: this tool has no http_allow entries", quote(t.host))
		case t.ip.IsValid():
			return deny(RuleIPLiteral, "host %s is an IP address; an IP literal must itself be listed in this tool's http_allow", t.host)
		}
		return deny(RuleAllowlist, "host %s is not in this tool's http_allow", quote(t.host))
	}
	if t.scheme != "https" && !plainHTTPHost(t) {
		return deny(RuleHTTPSRequired, "plain http to %s is not allowed; use https (plain http is only for loopback)", t.host)
	}
	if !p.allowsPort(t.port) {
		return deny(RulePort, "port %d is not allowed for this tool; it may use 443 and the ports in its http_ports", t.port)
	}
	return allowed
}

// plainHTTPHost reports whether a target may use plain http: a loopback IP
// literal, or "localhost" (whose answers the dialer requires to be
// loopback). Either way the address rules still need an allowance.
func plainHTTPHost(t target) bool {
	if t.ip.IsValid() {
		return netguard.Classify(t.ip).Rule == netguard.RuleLoopback
	}
	return t.host == "localhost"
}

func (p *Policy) allowsHost(host string) bool {
	for _, pat := range p.allow {
		if matchHost(pat, host) {
			return true
		}
	}
	return false
}

func (p *Policy) allowsPort(port uint16) bool {
	if port == HTTPSPort {
		return true
	}
	for _, q := range p.ports {
		if q == port {
			return true
		}
	}
	return false
}
