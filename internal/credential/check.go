package credential

import (
	"fmt"
	"net/textproto"
	"slices"
	"strings"
)

// ownedHeaders are headers no kind may name as its own: the gate sets them
// itself (Host, framing) or they carry another authority.
var ownedHeaders = []string{"Host", "Connection", "Upgrade", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding",
	"Content-Length", "Content-Type", "Accept-Encoding", "Range", "If-Range", "Cookie", "Proxy-Authorization"}

// HeaderNameProblem says what is wrong with a header name a kind sets, or
// "" if nothing is.
func HeaderNameProblem(h string) string {
	if h == "" {
		return "must not be empty"
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return fmt.Sprintf("%q is not an HTTP header name", h)
		}
	}
	k := textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(h, "_", "-"))
	if slices.Contains(ownedHeaders, k) || strings.HasPrefix(k, "Proxy-") {
		return fmt.Sprintf("%q is a header maiden sets or refuses itself", h)
	}
	return ""
}

// Check says what is wrong with s, or nil. It does not read CertFile (the
// gate does, when it compiles a policy).
func (s Spec) Check() error {
	switch s.Kind {
	case "", Bearer, MTLS:
	case Header:
		if why := HeaderNameProblem(s.Header); why != "" {
			return fmt.Errorf("header %s", why)
		}
		if s.Template != "" && strings.Count(s.Template, Placeholder) != 1 {
			return fmt.Errorf("template must hold %s exactly once", Placeholder)
		}
		if !HeaderValue(s.Template) {
			return fmt.Errorf("template holds a control character")
		}
	case Basic:
		if strings.Contains(s.Username, ":") || !HeaderValue(s.Username) {
			return fmt.Errorf("username may not hold ':' or control characters")
		}
	case HMAC:
		if !slices.Contains(HMACAlgorithms, s.Algorithm) {
			return fmt.Errorf("algorithm must be one of %s, got %q", strings.Join(HMACAlgorithms, ", "), s.Algorithm)
		}
		for _, h := range []string{s.SignatureHeader, s.TimestampHeader} {
			if h == "" {
				continue
			}
			if why := HeaderNameProblem(h); why != "" {
				return fmt.Errorf("header %s", why)
			}
		}
	case SigV4:
		if s.AccessKeyID == "" || s.Region == "" || s.Service == "" {
			return fmt.Errorf("access_key_id, region and service are required")
		}
		for _, v := range []string{s.Region, s.Service} {
			if strings.ContainsAny(v, "/\n ") || !HeaderValue(v) {
				return fmt.Errorf("region and service are single words, got %q", v)
			}
		}
		if strings.ContainsAny(s.AccessKeyID, "/, ") || !HeaderValue(s.AccessKeyID) {
			return fmt.Errorf("access_key_id %q has a character it may not hold", s.AccessKeyID)
		}
	case OAuth2:
		if s.TokenURL == "" || s.ClientID == "" {
			return fmt.Errorf("token_url and client_id are required")
		}
		if !strings.HasPrefix(s.TokenURL, "https://") {
			return fmt.Errorf("token_url must be an https URL")
		}
		if s.Grant != "" && !slices.Contains(Grants, s.Grant) {
			return fmt.Errorf("grant must be one of %s, got %q", strings.Join(Grants, ", "), s.Grant)
		}
		if s.ClientSecret && s.Grant != GrantRefreshToken {
			return fmt.Errorf("client_secret is for grant %s (with client credentials the value is the client secret)", GrantRefreshToken)
		}
	default:
		return fmt.Errorf("unknown kind %q", s.Kind)
	}
	if s.Kind == MTLS && s.CertFile == "" {
		return fmt.Errorf("kind mtls needs cert_file")
	}
	return nil
}
