package egress

import (
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
