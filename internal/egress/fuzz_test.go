package egress

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzURLSeeds = []string{
	"https://api.example.com/v1?q=1#f",
	"HTTPS://API.EXAMPLE.COM.:443/",
	"https://api.example.com@evil.example/",
	"https://api.example.com:443@evil.example/",
	`https://api.example.com\@evil.example/`,
	"https://\u0430pi.example.com/",
	"https://\uff41\uff50\uff49.example.com/",
	"https://%61pi.example.com/",
	"https://%C3%A4pi.example.com/",
	"https://2130706433/",
	"https://0x7f.1/",
	"https://0177.0.0.1/",
	"https://127.1/",
	"https://127.0.0.1:8443/",
	"https://[::ffff:127.0.0.1]/",
	"https://[fe80::1%25eth0]/",
	"http://localhost:8080/x",
	"https://a.b.example.com/",
	"https://*.example.com/",
	"https://api.example.com:0443/",
	"https://api.example.com:/",
	"https:api.example.com",
	"//api.example.com/",
	"https://a.example/a b/%2F..%2f?q=a b|c",
	"https://a.example/?q=%zz",
	"https://a.example/\x00",
	"https://a.example:99999/",
}

// FuzzNormalizeURL: the normaliser never panics; every denial names its
// rule; an accepted URL re-normalises to itself, parses back to the same
// host, and is what the outgoing request carries; and a host that passes the
// policy always satisfies one of the patterns it was checked against.
func FuzzNormalizeURL(f *testing.F) {
	for _, s := range fuzzURLSeeds {
		f.Add(s)
	}
	p, err := NewPolicy("fuzz", Rules{Hosts: []string{"api.example.com", "*.example.com", "127.0.0.1", "::1", "localhost"},
		Ports: []uint16{8080, 8443},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tg, d := normalizeURL(raw)
		if !d.Allow {
			if d.Rule == "" || !strings.HasSuffix(d.Reason, "(rule: "+d.Rule+")") {
				t.Fatalf("denial without its rule: %+v", d)
			}
			return
		}
		s := tg.String()
		again, d2 := normalizeURL(s)
		if !d2.Allow || again != tg {
			t.Fatalf("%q normalised to %q, which normalises to %+v (%s)", raw, s, again, d2.Reason)
		}
		if n, why := normalizeHostPattern(tg.host); why != "" || n != tg.host || strings.Contains(tg.host, "*") {
			t.Fatalf("host %q is not canonical", tg.host)
		}
		u, err := url.Parse(s)
		if err != nil || u.Hostname() != tg.host || u.User != nil || u.Fragment != "" {
			t.Fatalf("%q does not parse back to host %q: %v", s, tg.host, err)
		}
		if out := tg.url(); out.String() != s || out.Host != tg.hostPort() {
			t.Fatalf("outgoing URL %q, normalised %q", out, s)
		}
		if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			t.Fatalf("normalised URL %q has raw spaces, controls or non-ASCII", s)
		}
		if p.checkTarget(tg).Allow {
			ok := false
			for _, pat := range p.allow {
				ok = ok || matchHost(pat, tg.host)
			}
			if !ok {
				t.Fatalf("host %q passed the policy but matches no pattern", tg.host)
			}
			if a, err := netip.ParseAddr(tg.host); (err == nil) != tg.ip.IsValid() || err == nil && a != tg.ip {
				t.Fatalf("host %q and IP %v disagree", tg.host, tg.ip)
			}
			if !p.allowsPort(tg.port) {
				t.Fatalf("port %d passed the policy", tg.port)
			}
		}
	})
}

// FuzzHeaders: a method and header the gate accepts cannot change the
// request's framing or authority. The request is written the way the
// transport writes it and read back the way a server reads it; it must come
// back as exactly one request, with the checked Host, the tool's header
// intact and no header the tool may not set.
func FuzzHeaders(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "X-A", "b"},
		{"", "authorization", "Bearer x"},
		{"POST", "Transfer_Encoding", "chunked"},
		{"GET", "X-A", "a\r\nHost: evil"},
		{"GET", "X-A\r\nHost", "evil"},
		{"GET / HTTP/1.1\r\nHost: evil\r\n\r\nGET", "X-A", "b"},
		{"PUT", "Proxy", "http://evil/"},
		{"GET", "x-a", "\tvalue with tab "},
		{"GET", "Content-Type", "text/plain; charset=\xff"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, method, name, value string) {
		m, dm := checkMethod(method)
		h, dh := checkHeaders([]Header{{Name: name, Value: value}})
		for _, d := range []Ruling{dm, dh} {
			if !d.Allow && !strings.HasSuffix(d.Reason, "(rule: "+d.Rule+")") {
				t.Fatalf("denial without its rule: %+v", d)
			}
			if !d.Allow && strings.ContainsAny(d.Reason, "\r\n\x00") {
				t.Fatalf("denial message carries control bytes: %q", d.Reason)
			}
		}
		if !dm.Allow || !dh.Allow {
			return
		}
		key := textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(name, "_", "-"))
		if _, bad := refusedHeaders[key]; bad || strings.HasPrefix(key, "Proxy-") {
			t.Fatalf("refused header %q accepted", name)
		}
		tg, _ := normalizeURL("https://api.example.com/p")
		req := &http.Request{Method: m, URL: tg.url(), Header: h, Host: tg.hostPort(), ProtoMajor: 1, ProtoMinor: 1}
		var wire bytes.Buffer
		if err := req.Write(&wire); err != nil {
			return // the standard library refused it too
		}
		br := bufio.NewReader(bytes.NewReader(wire.Bytes()))
		got, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("accepted request does not parse back: %v\n%q", err, wire.String())
		}
		if got.Method != m || got.Host != "api.example.com" || got.RequestURI != "/p" {
			t.Fatalf("request line/Host changed: %s %s Host %q\n%q", got.Method, got.RequestURI, got.Host, wire.String())
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if vs := got.Header.Values(canon); (len(vs) != 1 || vs[0] != strings.Trim(value, " \t")) && !(canon == "User-Agent" && strings.Trim(value, " \t") == "") {
			t.Fatalf("header %q = %q after the round trip, sent %q", canon, vs, value)
		}
		for k, vs := range got.Header {
			// Go adds User-Agent, and Content-Length: 0 for a bodiless
			// POST, PUT or PATCH; anything else must be the tool's header.
			if k != canon && k != "User-Agent" && !(k == "Content-Length" && len(vs) == 1 && vs[0] == "0") {
				t.Fatalf("header %q appeared from nowhere\n%q", k, wire.String())
			}
		}
		if br.Buffered() != 0 {
			t.Fatalf("a second request follows the first:\n%q", wire.String())
		}
	})
}

// FuzzRedact: a secret of at least 8 bytes never survives raw, and the
// base64 or hex encoding of any text containing it is always altered,
// whatever surrounds it.
func FuzzRedact(f *testing.F) {
	f.Add("s3cr3t-token-value", "prefix ", " suffix")
	f.Add("aaaaaaaa", "aaaa", "aaaaaaaaa")
	f.Add("tok_3f9a\"<&>/+Zq~9$", "u:", "")
	f.Fuzz(func(t *testing.T, secret, prefix, suffix string) {
		if len(secret) < 8 || strings.Contains(secret, "[") || strings.Contains(secret, "]") {
			return // markers contain brackets: a secret made of them could reappear around one
		}
		r := newRedactor([]secretValue{{"S", secret}})
		text := prefix + secret + suffix
		out := r.String(text)
		if strings.Contains(out, secret) && !strings.Contains("[REDACTED:S]", secret) {
			t.Fatalf("secret survives in %q", out)
		}
		// Upper- and lower-cased, and MIME base64 (lines of 76, CRLF)
		// of text long enough for the secret to cross a line break.
		mime := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x01", 50) + text))
		for i := 76; i < len(mime); i += 78 {
			mime = mime[:i] + "\r\n" + mime[i:]
		}
		forms := []string{
			base64.StdEncoding.EncodeToString([]byte(text)),
			base64.RawURLEncoding.EncodeToString([]byte(text)),
			hex.EncodeToString([]byte(text)),
			mime,
		}
		if utf8.ValidString(secret) {
			// (Case-mapping invalid UTF-8, or a rune the prefix starts
			// and the secret ends, changes bytes of the secret itself.)
			forms = append(forms, strings.ToUpper(text), strings.ToLower(text))
		}
		for _, enc := range forms {
			if r.String(enc) == enc {
				t.Fatalf("encoded text %q not redacted", enc)
			}
		}
	})
}
