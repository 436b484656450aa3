package builtin

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/textproto"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/egress"
)

// Caps of web_fetch.
const (
	// MaxFetchBody is the response body web_fetch returns: a longer body is cut (at a UTF-8 boundary for text)
	// and Truncated is set. The Fetcher's own cap (the gate's, 2 MiB by default) refuses larger bodies whole.
	MaxFetchBody = 1 << 20
	// MaxFetchRequestBody bounds the request body a caller may send.
	MaxFetchRequestBody = 2 << 20
	// MaxWebInput bounds web_fetch's input JSON.
	MaxWebInput = 6*MaxFetchRequestBody + 64<<10
)

// DomainNetwork is the CommandError domain of web_fetch's boundary failures. BOUNDARIES.md names command,
// background_command and filesystem; issue 14 asks for network refusals as structured errors, so this package adds
// "network" (boundary.CommandError.Validate does not know it yet: see docs/builtins.md).
const DomainNetwork = "network"

// CommandError reasons of web_fetch's material checks (BOUNDARIES.md "Secret material").
const (
	// ReasonCredentialNotConfigured: a part of the session's secret material is configured but has no value.
	ReasonCredentialNotConfigured = "credential_not_configured"
	// ReasonProxyNotSupported: the session's material has a proxy secret, which maiden cannot use (its egress gate
	// dials the checked address directly and never goes through a proxy).
	ReasonProxyNotSupported = "proxy_not_supported"
)

// Fetcher sends one request through the egress gate and returns the gate's capped, redacted response, or its error
// as a value, exactly as (*egress.Gate).Fetch does. The caller of WebFetch builds it over the gate with the policy of
// the agent's web_fetch binding (its host allowlist, ports, CA files, the connection secret's name in Secrets) and
// sets, on every request, Authorize (the agent's network and secret cards) and Caller before calling the gate:
//
//	f := func(ctx context.Context, r egress.Request) (*egress.Response, *egress.FetchError) {
//		r.Authorize, r.Caller = walletAuthorizer(wallet), agent
//		return gate.Fetch(ctx, policy, r)
//	}
//
// The gate gives https only (plain http to loopback only), no redirects, no proxy, a body cap and one audit event
// per request. A Fetcher must never change the request's URL, method, headers or credential.
//
// The policy must declare every secret name of the material (Connection.Name and each SecretHeader.Secret) in
// its Secrets, and the gate's LookupSecret must resolve them to the same values: the gate then redacts them in
// everything it writes itself (its audit event and error messages, which can quote server text) as well as in the
// response. WebFetch redacts the response and errors again, but it cannot reach the gate's audit log.
type Fetcher func(ctx context.Context, req egress.Request) (*egress.Response, *egress.FetchError)

// Material is a session's secret material for web_fetch (BOUNDARIES.md "Secret material"), resolved by the host
// before the call. It is used only inside WebFetch: sent to the server the request goes to, never returned, never in
// an error's text, and the response (headers, body) and every error are redacted for its values and their common
// encodings. The zero value is no material.
type Material struct {
	// Connection is the credential for the destination. It travels as the request's egress credential: the gate
	// attaches it as "Authorization: Bearer <value>", after its own checks (the secret declared in the policy, its
	// [secrets.NAME] destinations) and the caller's secret:use card. Name is the secret's name as the gate's
	// LookupSecret knows it; Value is the same value, for redaction and to tell a configured secret from a missing one.
	Connection *Credential
	// Headers are secret request headers, such as X-Api-Key. The caller's headers cannot set these names. Names
	// the gate reserves (Authorization, Cookie, Proxy-*, framing headers) are refused by the gate.
	Headers []SecretHeader
	// Proxy is proxy authentication (Proxy-Authorization toward an operator's proxy). maiden's gate never uses a
	// proxy: sending it would hand the proxy secret to the destination, so material holding one is refused with
	// proxy_not_supported before anything is sent.
	Proxy *ProxySecret
}

// Credential is a connection secret: its name (for the gate and the audit) and its value.
type Credential struct {
	Name  string
	Value string `json:"-"` // never encoded, so a logged or stored Material carries no value
}

// SecretHeader is one secret request header: the header's name, the name of the host secret its value was resolved
// from (the redaction marker's name, and the name the Fetcher's policy declares), and the value.
type SecretHeader struct {
	Name   string
	Secret string
	Value  string `json:"-"`
}

// ProxySecret is proxy authentication material.
type ProxySecret struct {
	Value string `json:"-"`
}

// The String methods keep material out of logs and fmt output by accident.

func (c Credential) String() string { return "Credential(" + c.Name + ", value redacted)" }
func (h SecretHeader) String() string {
	return "SecretHeader(" + h.Name + ", " + h.Secret + ", value redacted)"
}
func (ProxySecret) String() string { return "ProxySecret(value redacted)" }

// GoString is String for %#v.
func (c Credential) GoString() string { return c.String() }

// GoString is String for %#v.
func (h SecretHeader) GoString() string { return h.String() }

// GoString is String for %#v.
func (p ProxySecret) GoString() string { return p.String() }

// WebFetchInput is web_fetch's input. Headers are the caller's request headers (name → value); Body is sent as is.
type WebFetchInput struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    *string           `json:"body,omitempty"`
}

// WebFetchOutput is web_fetch's output: the status, the response headers (canonical name → values, in the order the
// server sent them), the body as text (or base64 when it is not valid UTF-8, with Encoding "base64"), cut at
// MaxFetchBody with Truncated set. Redirects are not followed: a 3xx is returned as it is.
type WebFetchOutput struct {
	Status    int                 `json:"status"`
	Headers   map[string][]string `json:"headers"`
	Body      string              `json:"body"`
	Encoding  string              `json:"encoding"`
	Truncated bool                `json:"truncated"`
}

// WebFetch sends one HTTP request through f with the session's material m, if b allows the network. With the
// network disabled it fails with the structured error (domain network, reason sandbox_boundary_required,
// requiredExpansion {"network":{"enabled":true}}) before anything else: f is not called, nothing is resolved or
// dialled. Its output is a *WebFetchOutput.
func WebFetch(ctx context.Context, b boundary.Boundary, in []byte, f Fetcher, m Material) (out any, err error) {
	var x WebFetchInput
	if err := decode(ToolWebFetch, in, MaxWebInput, &x); err != nil {
		return nil, err
	}
	if x.URL == "" {
		return nil, errorf(ToolWebFetch, "", ReasonInvalidInput, "url is required")
	}
	ok, required := boundary.Check(b, boundary.Need{Network: true})
	if !ok {
		if required != nil {
			return nil, boundary.Required(DomainNetwork, ToolWebFetch, *required,
				"web_fetch: the session's boundary has the network disabled; ask for requiredExpansion with request_sandbox_boundary")
		}
		return nil, boundary.Refused(DomainNetwork, ToolWebFetch, ReasonNotManaged,
			fmt.Sprintf("web_fetch: the session's boundary is %s, which maiden cannot check or widen", b.Kind))
	}
	if err := checkMaterial(m); err != nil {
		return nil, err
	}
	red := materialRedactor(m)
	// Errors name the URL without its query or fragment: they can hold a caller's own keys, and errors reach
	// audit records (the gate's audit leaves the query out too).
	target := x.URL
	if i := strings.IndexAny(target, "?#"); i >= 0 {
		target = target[:i]
	}
	target = shorten(red(target))
	if x.Body != nil && len(*x.Body) > MaxFetchRequestBody {
		return nil, &Error{Tool: ToolWebFetch, Target: target, Reason: ReasonInvalidInput,
			Message: fmt.Sprintf("body is %d bytes, over the %d-byte cap", len(*x.Body), MaxFetchRequestBody)}
	}
	req := egress.Request{Method: x.Method, URL: x.URL}
	names := make([]string, 0, len(x.Headers))
	for n := range x.Headers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for _, h := range m.Headers {
			if headerKey(n) == headerKey(h.Name) {
				return nil, &Error{Tool: ToolWebFetch, Target: target, Reason: ReasonInvalidInput,
					Message: fmt.Sprintf("header %s is set by the session's secret material and cannot be set by the caller", shorten(n))}
			}
		}
		req.Headers = append(req.Headers, egress.Header{Name: n, Value: x.Headers[n]})
	}
	for _, h := range m.Headers {
		if h.Secret == "" {
			// The gate checks a secret header by its secret's name
			// (destinations, secret:use); an unnamed one cannot be.
			return nil, &Error{Tool: ToolWebFetch, Target: target, Reason: ReasonInvalidInput,
				Message: fmt.Sprintf("secret header %s names no secret, so its destinations cannot be checked; nothing was sent", shorten(h.Name))}
		}
		req.Headers = append(req.Headers, egress.Header{Name: h.Name, Value: h.Value})
		// The gate checks each like a credential: declared, its
		// destinations, the caller's secret:use card.
		if !slices.Contains(req.HeaderSecrets, h.Secret) {
			req.HeaderSecrets = append(req.HeaderSecrets, h.Secret)
		}
	}
	if x.Body != nil {
		req.Body = []byte(*x.Body)
	}
	if m.Connection != nil {
		req.Credential, req.HasCredential = m.Connection.Name, true
	}
	if f == nil {
		return nil, &Error{Tool: ToolWebFetch, Target: target, Reason: ReasonFetchFailed, Message: "no fetcher configured on the host"}
	}
	resp, ferr := f(ctx, req)
	if ferr != nil {
		reason := ReasonFetchFailed
		switch ferr.Kind {
		case egress.FetchDenied:
			reason = ReasonFetchDenied
		case egress.FetchTimeout:
			reason = ReasonFetchTimeout
		case egress.FetchTooLarge:
			reason = ReasonFetchTooLarge
		}
		msg := ferr.Message
		if msg == "" {
			msg = string(ferr.Kind)
		}
		return nil, &Error{Tool: ToolWebFetch, Target: target, Reason: reason, Rule: ferr.Rule, Message: red(msg)}
	}
	if resp == nil {
		return nil, &Error{Tool: ToolWebFetch, Target: target, Reason: ReasonFetchFailed, Message: "the fetcher returned neither a response nor an error"}
	}
	o := &WebFetchOutput{Status: resp.Status, Headers: map[string][]string{}, Encoding: EncodingText}
	for _, h := range resp.Headers {
		k := red(h.Name)
		o.Headers[k] = append(o.Headers[k], red(h.Value))
	}
	// Redact the whole body before cutting it, so a cut cannot split a secret out of the redactor's reach.
	body := red(string(resp.Body))
	if utf8.ValidString(body) {
		if len(body) > MaxFetchBody {
			cut := MaxFetchBody
			for cut > 0 && !utf8.RuneStart(body[cut]) {
				cut--
			}
			body, o.Truncated = body[:cut], true
		}
		o.Body = body
	} else {
		if len(body) > MaxFetchBody {
			body, o.Truncated = body[:MaxFetchBody], true
		}
		o.Body, o.Encoding = base64.StdEncoding.EncodeToString([]byte(body)), EncodingBase64
	}
	return o, nil
}

// checkMaterial refuses material that cannot be used, before anything is sent. The messages name parts, never values.
func checkMaterial(m Material) error {
	if m.Proxy != nil {
		return boundary.Refused(DomainNetwork, ToolWebFetch, ReasonProxyNotSupported,
			"web_fetch: the session's secret material holds a proxy secret, but maiden never sends requests through a proxy (the egress gate dials the checked address itself); remove the proxy material from the session or binding")
	}
	if c := m.Connection; c != nil && (c.Name == "" || c.Value == "") {
		return boundary.Refused(DomainNetwork, ToolWebFetch, ReasonCredentialNotConfigured,
			fmt.Sprintf("web_fetch: the connection secret %s is configured but has no value on the host", shorten(c.Name)))
	}
	for _, h := range m.Headers {
		if h.Name == "" || h.Value == "" {
			return boundary.Refused(DomainNetwork, ToolWebFetch, ReasonCredentialNotConfigured,
				fmt.Sprintf("web_fetch: the secret header %s is configured but has no value on the host", shorten(h.Name)))
		}
	}
	return nil
}

// headerKey compares header names as the gate does: canonical, with '_' as '-' (CGI servers treat them alike).
func headerKey(n string) string {
	return textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(n, "_", "-"))
}

// materialRedactor returns a function hiding m's values and their common encodings (egress's redactor: raw,
// base64 at each alignment, hex, percent- and JSON-escaped, HTML and backslash escapes), each replaced by
// [REDACTED:NAME] with the secret's name (for a header without one, "header:" and the header's canonical name):
// the marker the gate writes for the same value.
func materialRedactor(m Material) func(string) string {
	vals := map[string]string{}
	var names []string
	add := func(name, v string) {
		if v == "" {
			return
		}
		if _, dup := vals[name]; dup {
			name += "#" + fmt.Sprint(len(names))
		}
		vals[name] = v
		names = append(names, name)
	}
	if m.Connection != nil {
		add(m.Connection.Name, m.Connection.Value)
	}
	for _, h := range m.Headers {
		name := h.Secret
		if name == "" {
			name = "header:" + headerKey(h.Name)
		}
		add(name, h.Value)
	}
	if len(names) == 0 {
		return func(s string) string { return s }
	}
	p, err := egress.NewPolicy(ToolWebFetch, egress.Rules{Secrets: names})
	if err != nil {
		// Cannot happen (no hosts, no CA files); fail closed: nothing of the text survives.
		return func(string) string { return "[REDACTED:material]" }
	}
	g := egress.New(&egress.Options{LookupSecret: func(n string) (string, bool) {
		v, ok := vals[n]
		return v, ok
	}})
	return g.Redactor(p)
}
