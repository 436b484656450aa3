package mcpimport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// newHTTPClient checks the URL and returns the client that carries the
// upstream's requests: the credential is attached to requests to the URL's
// own origin only, and redirects are never followed (a redirect could carry
// the request, and a credential set on it, elsewhere).
func newHTTPClient(o Options) (*http.Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("MCP upstream %q: URL: %v", o.Name, err)
	}
	if u.User != nil {
		return nil, fmt.Errorf("MCP upstream %q: the URL has user information; give the credential by name instead", o.Name)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("MCP upstream %q: URL %q has no host", o.Name, u.Redacted())
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("MCP upstream %q: URL %s is plain http to a host that is not loopback; use https", o.Name, u.Redacted())
		}
	default:
		return nil, fmt.Errorf("MCP upstream %q: URL scheme %q: want https (or http to loopback)", o.Name, u.Scheme)
	}
	header := o.CredentialHeader
	if header == "" {
		header = "Authorization"
	}
	if strings.ContainsAny(header, " \t\r\n:") || header == "" {
		return nil, fmt.Errorf("MCP upstream %q: credential header name %q is not a header name", o.Name, header)
	}
	base := http.DefaultTransport
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		base = o.HTTPClient.Transport
	}
	var rt http.RoundTripper = base
	if o.Credential != nil {
		rt = &credTransport{base: base, scheme: u.Scheme, host: canonicalHost(u), header: http.CanonicalHeaderKey(header), get: o.Credential, name: o.Name}
	}
	c := &http.Client{
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	if o.HTTPClient != nil {
		c.Timeout = o.HTTPClient.Timeout
		c.Jar = o.HTTPClient.Jar
	}
	return c, nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// canonicalHost is host:port with the scheme's default port made explicit.
func canonicalHost(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

type credTransport struct {
	base         http.RoundTripper
	scheme, host string
	header       string
	get          func(ctx context.Context) (string, error)
	name         string
}

func (t *credTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != t.scheme || canonicalHost(req.URL) != t.host {
		// Not the upstream's origin: no credential. (With redirects off
		// this does not happen through the SDK; it is the second lock.)
		return t.base.RoundTrip(req)
	}
	v, err := t.get(req.Context())
	if err != nil {
		// The callback's error may name the credential, never its value.
		return nil, fmt.Errorf("MCP upstream %q: credential: %w", t.name, err)
	}
	if v == "" || strings.ContainsAny(v, "\r\n") {
		return nil, errors.New("MCP upstream " + fmt.Sprintf("%q", t.name) + ": the credential is empty or has a line break; not sent")
	}
	r := req.Clone(req.Context())
	r.Header.Set(t.header, v)
	return t.base.RoundTrip(r)
}
