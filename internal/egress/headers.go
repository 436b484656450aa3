package egress

import (
	"net/http"
	"net/textproto"
	"strings"
)

// Limits on what a tool may send as headers; generous for APIs, small
// enough that a request cannot become a memory or log problem.
const (
	maxHeaders      = 64
	maxHeaderName   = 256
	maxHeaderBytes  = 64 << 10
	maxMethodLength = 32
)

// refusedHeaders maps canonical names a tool may not set to why not.
var refusedHeaders = map[string]string{
	"Authorization":       whyAuthority,
	"Proxy-Authorization": whyAuthority,
	"Cookie":              whyAuthority,
	"Host":                "maiden sets Host to the host it checked",
	"Connection":          whyFraming,
	"Upgrade":             whyFraming,
	"Keep-Alive":          whyFraming,
	"Te":                  whyFraming,
	"Trailer":             whyFraming,
	"Transfer-Encoding":   whyFraming,
	"Content-Length":      whyFraming,
	"Http2-Settings":      whyFraming,
	"Accept-Encoding":     "maiden negotiates content coding itself, so it can cap and redact the decoded body",
	"Proxy":               whyProxy,
}

const (
	whyAuthority = "it carries authority; maiden attaches credentials itself (name a secret with the credential argument)"
	whyFraming   = "it controls message framing or the connection, which maiden manages"
	whyProxy     = "proxy headers are reserved"
)

// checkMethod returns the method to send ("" means GET).
func checkMethod(m string) (string, Ruling) {
	if m == "" {
		return http.MethodGet, allowed
	}
	if len(m) > maxMethodLength || !validToken(m) {
		return "", deny(RuleMethod, "method %s is not a valid HTTP method token", quote(m))
	}
	if strings.EqualFold(m, http.MethodConnect) {
		return "", deny(RuleMethod, "method CONNECT is not allowed")
	}
	return m, allowed
}

// checkHeaders validates a tool's headers and returns them ready to send.
// Every header is checked before anything is sent; the first problem wins.
func checkHeaders(hs []Header) (http.Header, Ruling) {
	if len(hs) > maxHeaders {
		return nil, deny(RuleHeaderInvalid, "%d headers given, the maximum is %d", len(hs), maxHeaders)
	}
	out := make(http.Header, len(hs)+2)
	total := 0
	for _, h := range hs {
		total += len(h.Name) + len(h.Value)
		if total > maxHeaderBytes {
			return nil, deny(RuleHeaderInvalid, "headers add up to more than %d bytes", maxHeaderBytes)
		}
		if len(h.Name) > maxHeaderName || !validToken(h.Name) {
			return nil, deny(RuleHeaderInvalid, "header name %s is not a valid HTTP token", quote(h.Name))
		}
		// '_' and '-' are the same to CGI-style servers (both become '_'
		// in HTTP_* variables), so compare as if they were the same here.
		key := textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(h.Name, "_", "-"))
		if why, ok := refusedHeaders[key]; ok {
			return nil, deny(RuleHeaderRefused, "header %s may not be set by a tool: %s", quote(h.Name), why)
		}
		if strings.HasPrefix(key, "Proxy-") {
			return nil, deny(RuleHeaderRefused, "header %s may not be set by a tool: %s", quote(h.Name), whyProxy)
		}
		if i, what := badValueByte(h.Value); i >= 0 {
			return nil, deny(RuleHeaderInvalid, "value of header %s contains %s at byte %d", quote(h.Name), what, i)
		}
		name := textproto.CanonicalMIMEHeaderKey(h.Name)
		out[name] = append(out[name], h.Value)
	}
	return out, allowed
}

// badValueByte returns the index of the first byte that may not appear in a
// header value (RFC 9110 field-value: no controls except tab), and what it
// is; -1 if there is none.
func badValueByte(v string) (int, string) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\r' || c == '\n':
			return i, "a line break (CR or LF)"
		case c == 0:
			return i, "a NUL byte"
		case c < ' ' && c != '\t' || c == 0x7f:
			return i, "a control character"
		}
	}
	return -1, ""
}

// validToken reports whether s is an RFC 9110 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
