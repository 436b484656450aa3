package egress

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// caseSecret has letters in both cases, digits and punctuation, and is
// long enough (48 bytes, 64 base64 characters) to cross a MIME line break
// wherever it starts.
const caseSecret = "Tok_9fQzR2xW7-LmNp/4+KvYb8Hs3JdEe1uIoAaCc6Gg0TtZz"

// echoFetch starts a TLS server on loopback (reached as api.example.com,
// which the test resolver answers) whose handler writes body (and the
// headers set by hdr, if any), fetches it with API_TOKEN attached, and
// returns what the tool would see.
func echoFetch(t *testing.T, secret string, hdr func(h http.Header), body func(r *http.Request) string) *Response {
	t.Helper()
	e := newEnv(t)
	e.secrets["API_TOKEN"] = secret
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if hdr != nil {
			hdr(w.Header())
		}
		b := body(r)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		io.WriteString(w, b)
	}, false)
	e.res.set("api.example.com", "127.0.0.1")
	p := mustPolicy(t, toolFor(t, s.port))
	resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, withCred(get(urlFor(s, "api.example.com", "/echo")), "API_TOKEN"))
	if ferr != nil {
		t.Fatal(ferr)
	}
	if strings.Contains(e.audit.raw(), secret) {
		t.Error("audit log holds the secret")
	}
	return resp
}

// visible is everything of resp the tool sees, headers then body.
func visible(resp *Response) string {
	var b strings.Builder
	for _, h := range resp.Headers {
		b.WriteString(h.Name + ": " + h.Value + "\n")
	}
	b.WriteString("\n")
	b.Write(resp.Body)
	return b.String()
}

// checkContentLength: the Content-Length the tool sees is the length of
// the body it gets, never the server's (which counts the secret's bytes).
func checkContentLength(t *testing.T, resp *Response) {
	t.Helper()
	var cl []string
	for _, h := range resp.Headers {
		if strings.EqualFold(h.Name, "Content-Length") {
			cl = append(cl, h.Value)
		}
	}
	if len(cl) != 1 || cl[0] != strconv.Itoa(len(resp.Body)) {
		t.Errorf("Content-Length %q for a body of %d bytes", cl, len(resp.Body))
	}
}

// TestRedactCaseChangedEcho: a server that echoes the secret upper- or
// lower-cased (in the body, a header value, inside its
// other encodings) must not hand the tool any case of it.
func TestRedactCaseChangedEcho(t *testing.T) {
	forms := map[string]string{
		"upper":            strings.ToUpper(caseSecret),
		"lower":            strings.ToLower(caseSecret),
		"bearer, upper":    strings.ToUpper("Bearer " + caseSecret),
		"swapped":          swapCase(caseSecret),
		"query, upper":     strings.ToUpper(escapeEveryByte(caseSecret, "%%%02x")),
		"JSON \\u, lower":  strings.ToLower(jsonEscapeAll(caseSecret)),
		"HTML refs, upper": strings.ToUpper(strings.NewReplacer("/", "&#x2f;", "+", "&#43;").Replace(caseSecret)),
	}
	resp := echoFetch(t, caseSecret, func(h http.Header) {
		h.Set("X-Echo-Upper", strings.ToUpper(caseSecret))
		h.Set("X-Echo-Lower", strings.ToLower(caseSecret))
	}, func(r *http.Request) string {
		var b strings.Builder
		for k, v := range forms {
			fmt.Fprintf(&b, "%s=%s\n", k, v)
		}
		return b.String()
	})
	got := visible(resp)
	for k, v := range forms {
		if strings.Contains(got, v) {
			t.Errorf("form %s (%q) reached the tool", k, v)
		}
	}
	// No run of 8 letters of the secret survives in any case.
	low := strings.ToLower(got)
	for i := 0; i+8 <= len(caseSecret); i++ {
		if w := strings.ToLower(caseSecret[i : i+8]); strings.Contains(low, w) {
			t.Errorf("%q (any case) reached the tool:\n%s", w, got)
			break
		}
	}
	if n := strings.Count(string(resp.Body), "[REDACTED:API_TOKEN]"); n != len(forms) {
		t.Errorf("body has %d markers, want %d:\n%s", n, len(forms), resp.Body)
	}
	for _, h := range []string{"X-Echo-Upper", "X-Echo-Lower"} {
		if v := header(resp.Headers, h); v != "[REDACTED:API_TOKEN]" {
			t.Errorf("%s = %q", h, v)
		}
	}
	checkContentLength(t, resp)
}

func swapCase(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return r
	}, s)
}

// mimeWrap breaks s into lines of width characters, each ended by eol,
// as openssl base64 (64), Python's base64.encodebytes and MIME (76) do.
func mimeWrap(s string, width int, eol string) string {
	var b strings.Builder
	for len(s) > width {
		b.WriteString(s[:width] + eol)
		s = s[width:]
	}
	b.WriteString(s + eol)
	return b.String()
}

// TestRedactMIMEBase64Echo: a server that echoes the secret inside MIME
// base64 (line breaks every 64 or 76 characters, LF or CRLF, raw or as the
// \n escapes of a JSON string), std or URL alphabet, at every offset of
// the line, so every alignment of the secret's bytes and every place a
// break can fall inside its encoding. The tool must get no 8-character run
// of the secret's base64 (6 bytes of it) at any alignment, with the line
// breaks taken out.
func TestRedactMIMEBase64Echo(t *testing.T) {
	type shape struct {
		name  string
		enc   *base64.Encoding
		width int
		eol   string
		slash string // how '/' is written (PHP's json_encode: \/)
	}
	var shapes []shape
	for _, enc := range []struct {
		name string
		e    *base64.Encoding
	}{{"std", base64.StdEncoding}, {"url", base64.URLEncoding}} {
		for _, width := range []int{76, 64} {
			for _, eol := range []string{"\n", "\r\n", `\n`, `\r\n`} {
				shapes = append(shapes, shape{fmt.Sprintf("%s/%d/%q", enc.name, width, eol), enc.e, width, eol, "/"})
			}
			if enc.name == "std" {
				shapes = append(shapes, shape{fmt.Sprintf("%s/%d/JSON, slash escaped", enc.name, width), enc.e, width, `\n`, `\/`})
			}
		}
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			secret := caseSecret
			if sh.slash != "/" {
				// '?' encodes to '/' at one alignment, so a '/' (written
				// \/) is right before many of the breaks.
				secret = strings.Repeat("sk-?~??>?/??", 4)
			}
			// One blob per prefix length: the secret's encoding starts at
			// every character offset of a line (and so at every byte
			// alignment), and each blob crosses at least one break.
			n := sh.width * 3 / 4
			resp := echoFetch(t, secret, nil, func(r *http.Request) string {
				var b strings.Builder
				for p := range n + 3 {
					blob := strings.Repeat("\x01", p) + secret + "\x02tail"
					b.WriteString("-----\n" + strings.ReplaceAll(mimeWrap(sh.enc.EncodeToString([]byte(blob)), sh.width, sh.eol), "/", sh.slash))
				}
				return b.String()
			})
			got := visible(resp)
			joined := strings.NewReplacer("\r\n", "", "\n", "", `\r\n`, "", `\n`, "", `\/`, "/").Replace(got)
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
				for shift := range 3 {
					e := enc.EncodeToString([]byte(strings.Repeat("\x00", shift) + secret))
					// Characters 3.. are all the secret's bits whatever
					// the alignment; the last 4 may hold padding.
					core := e[3 : len(e)-4]
					for i := 0; i+8 <= len(core); i++ {
						if strings.Contains(joined, core[i:i+8]) {
							t.Fatalf("%q of the secret's base64 (shift %d) reached the tool:\n%s", core[i:i+8], shift, got)
						}
					}
				}
			}
			if c := strings.Count(string(resp.Body), "[REDACTED:API_TOKEN]"); c != n+3 {
				t.Errorf("%d markers for %d blobs", c, n+3)
			}
			checkContentLength(t, resp)
		})
	}
}

// TestRedactedBodyLength: the server's Content-Length counts the secret's
// bytes ("got " + a 94-byte secret is 98), so handing it to the tool with
// the body "got [REDACTED:API_TOKEN]" tells it the secret's length. The
// tool sees the length of the body it gets; the headers that describe the
// server's bytes (a range's complete length, an ETag, digests) go when
// redaction changed them; a HEAD's (of a body nobody read) go whatever it
// held; a body with nothing to hide keeps its headers as sent.
func TestRedactedBodyLength(t *testing.T) {
	secret := strings.Repeat("k9", 47) // 94 bytes
	described := func(h http.Header) {
		h.Set("ETag", `W/"62-Xq1rTgGGxbcdHe0zfjmRfw"`)
		h.Set("Content-MD5", "Q2hlY2sgSW50ZWdyaXR5IQ==")
		h.Set("Digest", "sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=")
		h.Set("Content-Range", "bytes 0-97/98")
		h.Set("X-Other", "kept")
	}
	for _, tc := range []struct {
		name, method, body string
		redacted           bool // the headers describing the server's bytes go
	}{
		{"echo", http.MethodGet, "got " + secret, true},
		{"echo, upper-cased", http.MethodPost, "got " + strings.ToUpper(secret), true},
		{"nothing to hide", http.MethodGet, "got nothing of the sort", false},
		{"HEAD of an echo", http.MethodHead, "got " + secret, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.secrets["API_TOKEN"] = secret
			s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				described(w.Header())
				w.Header().Set("Content-Length", strconv.Itoa(len(tc.body)))
				io.WriteString(w, tc.body) // a HEAD's body is dropped by the server
			}, false)
			e.res.set("api.example.com", "127.0.0.1")
			p := mustPolicy(t, toolFor(t, s.port))
			req := withCred(get(urlFor(s, "api.example.com", "/echo")), "API_TOKEN")
			req.Method = tc.method
			resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, req)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if strings.Contains(strings.ToLower(visible(resp)), secret[:8]) {
				t.Fatalf("the secret reached the tool: %s", visible(resp))
			}
			cl := header(resp.Headers, "Content-Length")
			switch {
			case tc.method == http.MethodHead:
				if cl != "" {
					t.Errorf("HEAD: Content-Length %q reached the tool (the echo's length)", cl)
				}
			case tc.redacted:
				if string(resp.Body) != "got [REDACTED:API_TOKEN]" {
					t.Fatalf("body %q", resp.Body)
				}
				checkContentLength(t, resp)
			default:
				if cl != strconv.Itoa(len(tc.body)) {
					t.Errorf("Content-Length %q for an unredacted body of %d bytes", cl, len(tc.body))
				}
			}
			for _, h := range []string{"ETag", "Content-MD5", "Digest", "Content-Range"} {
				if got := header(resp.Headers, h); (got == "") != tc.redacted {
					t.Errorf("%s = %q (body redacted: %v)", h, got, tc.redacted)
				}
			}
			if header(resp.Headers, "X-Other") != "kept" {
				t.Error("an unrelated header was dropped")
			}
			if v := visible(resp); tc.redacted && (strings.Contains(v, "98") || strings.Contains(v, "62-")) {
				t.Errorf("the unredacted length is visible:\n%s", v)
			}
		})
	}
}

// TestRedactCaseAndBreaksLeaveTextAlone: case-insensitive matching and
// the base64 line-break decoding find the secret, never anything else:
// prose, other base64 blocks and their line breaks come through byte for
// byte. Non-ASCII letters changed in case are found too.
func TestRedactCaseAndBreaksLeaveTextAlone(t *testing.T) {
	r := newRedactor([]secretValue{{"T", caseSecret}, {"U", "pässwörd-Ünïcode-42"}})
	other := mimeWrap(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("not the secret, ", 20))), 76, "\r\n")
	for _, in := range []string{
		"Dear tool,\nthe weather is fine.\r\nTOK_9FQZ is not the whole secret.\n",
		other,
		mimeWrap(base64.URLEncoding.EncodeToString([]byte(strings.Repeat("x", 200))), 64, "\n"),
		`{"pem":"` + strings.ReplaceAll(other, "\r\n", `\r\n`) + `"}`,
	} {
		if got := r.String(in); got != in {
			t.Errorf("changed text with no secret in it:\n%q\n%q", in, got)
		}
	}
	// Tiny secrets (under four bytes) are matched raw only, in any ASCII
	// case, and a non-ASCII byte of one is kept as it is.
	tiny := newRedactor([]secretValue{{"A", "q7"}, {"B", "é\xff"}})
	if got := tiny.String("Q7 q7 é\xff É\xff"); got != "[REDACTED:A] [REDACTED:A] [REDACTED:B] É\xff" {
		t.Errorf("tiny secrets: %q", got)
	}
	for _, in := range []string{strings.ToUpper("pässwörd-Ünïcode-42"), strings.ToLower("pässwörd-Ünïcode-42")} {
		if got := r.String("x " + in + " y"); got != "x [REDACTED:U] y" {
			t.Errorf("%q: got %q", in, got)
		}
	}
	// The marker replaces the secret's encoding and the break inside it,
	// and leaves the rest of the lines around it.
	blob := mimeWrap(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("a", 40)+caseSecret+strings.Repeat("z", 60))), 76, "\n")
	got := r.String(blob)
	lines := strings.Split(blob, "\n")
	if !strings.HasPrefix(got, lines[0][:52]) || !strings.HasSuffix(got, "\n"+lines[len(lines)-2]+"\n") ||
		strings.Count(got, "[REDACTED:T]") != 1 || strings.Count(got, "\n") != strings.Count(blob, "\n")-1 {
		t.Errorf("MIME blob redacted as\n%s\nfrom\n%s", got, blob)
	}
}

// TestRedactSecretInCanonicalisedHeaderName: a server that names a header
// after the secret ("X-Echo-<secret>") has the name canonicalised by the
// client's header parser (X-Echo-Tok-...): the secret arrives with its
// case changed even though the server never changed it.
func TestRedactSecretInCanonicalisedHeaderName(t *testing.T) {
	const secret = "tok-9fqzr2xw7lmnp4kvyb8hs3jd"
	resp := echoFetch(t, secret, func(h http.Header) {
		h["x-echo-"+secret] = []string{"in the name"} // sent as written
	}, func(*http.Request) string { return "ok" })
	got := visible(resp)
	if strings.Contains(strings.ToLower(got), secret[4:]) {
		t.Errorf("the secret reached the tool in a header name:\n%s", got)
	}
	if !strings.Contains(got, "[REDACTED:API_TOKEN]: in the name") {
		t.Errorf("header not redacted:\n%s", got)
	}
}
