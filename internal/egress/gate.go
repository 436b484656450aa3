package egress

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/internal/credential"
)

// SecretEnvPrefix is prepended to a secret's name to find its value in the
// process environment.
const SecretEnvPrefix = "MAIDEN_SECRET_"

// DefaultTimeout bounds a request whose context has no deadline. Calls from
// the sandbox always carry the tool's deadline.
const DefaultTimeout = 30 * time.Second

// Options configure a Gate. nil means all defaults.
type Options struct {
	// Resolver looks up host names; nil means net.DefaultResolver.
	Resolver Resolver
	// LookupSecret returns a secret's value by name; nil means
	// os.LookupEnv(SecretEnvPrefix + name). It is called on every request,
	// so a changed value is picked up at once.
	LookupSecret func(name string) (string, bool)
	// Audit receives one event per request, allowed or refused; nil
	// discards them.
	Audit *slog.Logger
	// Now is the clock of credentials: signatures' timestamps, access
	// tokens' expiry. nil means time.Now.
	Now func() time.Time
	// Tokens shares kind oauth2 access tokens (and rotated refresh tokens)
	// between the instances of one store, so they make one token request,
	// not one each (tokenshare.go); nil keeps them in this gate only.
	Tokens TokenStore
}

// Gate serves http-fetch for any number of tools. It is safe for concurrent
// use.
type Gate struct {
	resolver Resolver
	lookup   func(string) (string, bool)
	audit    *slog.Logger
	clock    func() time.Time
	tokens   sync.Map // tokenKey → *tokenCache (kind oauth2)
	fetched  sync.Map // secret name → *atomic.Int64, token requests made
	share    TokenStore
	// retired are the kind oauth2 access tokens the gate replaced before
	// they expired, redacted until then (oauth.go's retire).
	retiredMu sync.Mutex
	retired   []retiredToken
	// waitingForToken, if set (tests only), is called as a request
	// starts waiting for the token request another one made
	// (oauth.go's oauthToken): the event a test of the waiters needs.
	waitingForToken func(name string)
}

// New returns a Gate.
func New(opts *Options) *Gate {
	var o Options
	if opts != nil {
		o = *opts
	}
	g := &Gate{resolver: o.Resolver, lookup: o.LookupSecret, audit: o.Audit, clock: o.Now, share: o.Tokens}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.lookup == nil {
		g.lookup = func(name string) (string, bool) { return os.LookupEnv(SecretEnvPrefix + name) }
	}
	if g.audit == nil {
		g.audit = slog.New(slog.DiscardHandler)
	}
	return g
}

// HasSecret reports whether the secret name has a value the gate would
// attach: found by the gate's own lookup, and not empty (an empty value is
// refused as missing). It never returns the value.
func (g *Gate) HasSecret(name string) bool {
	v, ok := g.lookup(name)
	return ok && v != ""
}

// noNetwork is the policy of a tool without one: no host is allowed.
var noNetwork = &Policy{maxBytes: DefaultMaxResponseBytes}

// Redactor returns a function that hides the values of p's secrets, and
// their common encodings, in text: the sandbox applies it to the tool's
// logs, output and errors. Values are looked up now, once per call.
func (g *Gate) Redactor(p *Policy) func(string) string {
	if p == nil {
		p = noNetwork
	}
	return p.redactorFor(g.secretValues(p)).String
}

// RedactorIfAny is Redactor, or nil when it would change nothing: p names
// no secret, or none of its secrets has a value now. A caller that passes
// the redactor on where nil means "redact nothing" (sandbox.Call.Redact)
// saves the call through it on every log line and output.
func (g *Gate) RedactorIfAny(p *Policy) func(string) string {
	if p == nil {
		p = noNetwork
	}
	if len(p.secretNames()) == 0 {
		return nil
	}
	r := p.redactorFor(g.secretValues(p))
	if r.empty() {
		return nil
	}
	return r.String
}

// secretValues looks up the current values of p's secrets, once per name.
// A request uses this one snapshot for both the credential it attaches and
// the redactor it applies, so a value that changes mid-request cannot slip
// past redaction.
func (g *Gate) secretValues(p *Policy) []secretValue {
	names := p.secretNames()
	vals := make([]secretValue, 0, len(names))
	for _, name := range names {
		if v, ok := g.lookup(name); ok {
			vals = append(vals, secretValue{name, v})
		}
	}
	return vals
}

// withTokens is vals and the access and refresh tokens the gate holds for
// p's oauth2 secrets, each under its secret's name, for the redactor of
// every request of p: a token is derived from its secret and attached by
// the host like one, and an API may echo it in the answer to a later
// request that carries no credential (one that shows what it was sent).
// An access token the gate replaced before it expired is one of them
// until it expires: its issuer still accepts it.
// In a fixed order, so that the policy's cached redactor is reused while
// the tokens stay the same.
func (g *Gate) withTokens(p *Policy, vals []secretValue) []secretValue {
	out := vals
	for _, name := range p.secrets {
		switch p.spec(name).Kind {
		case credential.Basic:
			// The encoded pair is the password in another spelling, good
			// for as long as the password is. The value's own encodings
			// already hide the characters it determines; this hides the
			// pair whole, the bits of the value at its edges too.
			if v, d := resolveCredential(vals, name); d.Allow {
				out = append(slices.Clip(out), secretValue{name, credential.BasicPair(p.spec(name).Username, v)})
			}
			continue
		case credential.OAuth2:
		default:
			continue
		}
		toks := g.retiredTokens(name)
		g.tokens.Range(func(k, c any) bool {
			if k.(tokenKey).name == name {
				tc := c.(*tokenCache)
				tc.mu.Lock()
				e := tc.entry
				tc.mu.Unlock()
				for _, v := range []string{e.Token, e.Refresh} {
					if v != "" {
						toks = append(toks, v)
					}
				}
			}
			return true
		})
		slices.Sort(toks)
		for _, v := range toks {
			out = append(slices.Clip(out), secretValue{name, v})
		}
	}
	return out
}

// redactorFor returns the redactor for vals. Building one costs tens of
// microseconds, so the last one is kept on the policy and reused while the
// values stay the same.
func (p *Policy) redactorFor(vals []secretValue) *redactor {
	if c := p.redactor.Load(); c != nil && sameSecrets(c.vals, vals) {
		return c.r
	}
	r := newRedactor(vals)
	p.redactor.Store(&cachedRedactor{vals: vals, r: r})
	return r
}

type cachedRedactor struct {
	vals []secretValue
	r    *redactor
}

// sameSecrets compares secret values in constant time: the comparison
// should not be a timing oracle for a value, even one nobody can steer.
func sameSecrets(a, b []secretValue) bool {
	if len(a) != len(b) {
		return false
	}
	same := 1
	for i := range a {
		if a[i].name != b[i].name {
			return false
		}
		same &= subtle.ConstantTimeCompare([]byte(a[i].value), []byte(b[i].value))
	}
	return same == 1
}

// Fetch checks req against p and, if allowed, sends it and returns the
// capped, redacted response. Every outcome is a value for the tool; Fetch
// never fails the call. ctx's deadline bounds the whole exchange, whatever
// the server sends.
func (g *Gate) Fetch(ctx context.Context, p *Policy, req Request) (*Response, *FetchError) {
	start := time.Now()
	if p == nil {
		p = noNetwork // deny by default: no policy means no reach
	}
	ev := event{tool: p.tool, caller: req.Caller, method: req.Method}
	if req.HasCredential {
		ev.credential = req.Credential
	}
	// One snapshot of the secret values serves the credential this request
	// attaches and the redactor everything the tool, the error and the
	// audit event see.
	vals := g.secretValues(p)
	hidden := g.withTokens(p, vals)
	red := p.redactorFor(hidden)
	resp, ferr := g.fetch(ctx, p, req, vals, hidden, &red, &ev)
	if ferr != nil {
		ferr.Message = message(red, ferr)
		ferr.Rule = ev.rule
	}
	ev.duration = time.Since(start)
	ev.redact(red)
	if req.Redact != nil {
		ev.method, ev.host, ev.path, ev.credential, ev.reason = req.Redact(ev.method), req.Redact(ev.host), req.Redact(ev.path), req.Redact(ev.credential), req.Redact(ev.reason)
	}
	g.record(ctx, &ev)
	return resp, ferr
}

// noRangeWithSecret refuses a request that carries a secret and asks for
// part of a resource (Range, If-Range): redaction sees one response at a
// time, so a tool could ask an echoing server for the secret a few bytes at
// a time, each piece shorter than any form the redactor matches.
func noRangeWithSecret(h http.Header) Ruling {
	for k := range h {
		// '_' is '-' to CGI-style servers, as in checkHeaders.
		switch textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(k, "_", "-")) {
		case "Range", "If-Range":
			return deny(RuleRangeWithSecret, "header %s may not be sent with a secret: the response is redacted one piece at a time, so byte ranges could return the secret in pieces too short to recognise; fetch the whole resource", quote(k))
		}
	}
	return allowed
}

// message is the one choke point for the text of a fetch error. A denial
// is the gate's words about the tool's request, sent before anything
// reached the network: no server text, nothing to redact (and redacting
// the gate's own words would mangle them for a secret as short as "v").
// Every other message can quote what the server sent (a header, a
// certificate name, a status line), so it passes the redactor. Either way
// it is made valid UTF-8, because the tool receives it as a component
// string.
func message(red *redactor, ferr *FetchError) string {
	if ferr.Kind == FetchDenied {
		return strings.ToValidUTF8(ferr.Message, "\uFFFD")
	}
	return clean(red, ferr.Message)
}

// clean redacts s and replaces any bytes that are not valid UTF-8 (after
// redaction, so an invalid byte never hides part of a secret from it).
func clean(red *redactor, s string) string {
	return strings.ToValidUTF8(red.String(s), "\uFFFD")
}

// red is the request's redactor; fetch replaces it with one that also
// hides what attaching the credential derived (a signature), so the
// caller's copy redacts the error and the audit event with it too.
func (g *Gate) fetch(ctx context.Context, p *Policy, req Request, vals, hidden []secretValue, redp **redactor, ev *event) (*Response, *FetchError) {
	red := *redp
	// Policy first: every check below is pure or reads the secret store;
	// nothing touches the network until all of them pass.
	t, d := normalizeURL(req.URL)
	if d.Allow {
		ev.setTarget(t)
		d = p.checkTarget(t)
	} else {
		ev.host = rawHost(req.URL)
	}
	var method string
	if d.Allow {
		method, d = checkMethod(req.Method)
		ev.method = method
	}
	var header http.Header
	if d.Allow {
		header, d = checkHeaders(req.Headers)
	}
	if d.Allow {
		d = p.noSignatureHeader(header, req)
	}
	if d.Allow && (req.HasCredential || len(req.HeaderSecrets) > 0) {
		d = noRangeWithSecret(header)
	}
	if d.Allow && req.HasCredential {
		d = p.mayAttach(req.Credential, t, method)
	}
	if d.Allow && req.HasCredential {
		d = p.noOverride(req.Credential, header, t.query, req.Body)
	}
	for _, name := range req.HeaderSecrets {
		if d.Allow {
			d = p.mayAttach(name, t, method)
		}
		if d.Allow {
			d = p.noOverride(name, header, t.query, req.Body)
		}
		if d.Allow {
			d = p.headerKindOnly(name)
		}
		if d.Allow && req.Authorize != nil {
			d = authorize(req.Authorize, t, name)
		}
	}
	if d.Allow && req.Authorize != nil {
		// The caller's authority after the policy's: it can only narrow
		// what the policy allowed, and its denial names what the caller
		// lacks. Before the credential is resolved and attached.
		cred := ""
		if req.HasCredential {
			cred = req.Credential
		}
		d = authorize(req.Authorize, t, cred)
	}
	if d.Allow && req.HasCredential {
		// Resolved before anything below, so a missing value is refused
		// the same way whatever the kind.
		_, d = resolveCredential(vals, req.Credential)
	}
	if !d.Allow {
		return nil, ev.refuse(d)
	}

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	ctx = context.WithValue(ctx, callDeadline{}, deadline)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) { ev.addr = ci.Conn.RemoteAddr().String() },
	})
	hreq := &http.Request{
		Method:     method,
		URL:        t.url(),
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     header,
		Host:       t.hostPort(),
	}
	// The gate negotiates the coding, as the transport would (not for
	// HEAD, nor for a byte range, whose offsets would be the encoded
	// body's): the tool may not set Accept-Encoding (checkHeaders).
	askedGzip := method != http.MethodHead && header.Get("Range") == ""
	if askedGzip {
		header.Set("Accept-Encoding", "gzip")
	}
	if len(req.Body) > 0 {
		body := req.Body
		hreq.ContentLength = int64(len(body))
		hreq.Body = io.NopCloser(bytes.NewReader(body))
		hreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	hreq = hreq.WithContext(ctx)

	// The credential last, on the request exactly as it will be sent: a
	// signature covers the method, URL, Host and headers built above from
	// the checked parts, and the body.
	tr := p.transport(g)
	var own []secretValue // what attaching derived for this request alone
	if req.HasCredential {
		derived, mtls, d := p.attach(ctx, g, hreq, req, vals, t, "")
		if !d.Allow {
			return nil, ev.refuse(d)
		}
		if mtls != nil {
			tr = mtls
		}
		if len(derived) > 0 {
			own = derived
			red = newRedactor(append(slices.Clip(hidden), own...))
			*redp = red
		}
	}

	// RoundTrip, not http.Client: a redirect is a second request, and the
	// transport has no code that could make one.
	resp, err := tr.RoundTrip(hreq)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && req.HasCredential && p.spec(req.Credential).Kind == credential.OAuth2 {
		// The API refused the access token (revoked, expired early): one
		// new token, one retry, never more.
		resp.Body.Close()
		used := strings.TrimPrefix(hreq.Header.Get("Authorization"), "Bearer ")
		retry := hreq.Clone(ctx)
		if len(req.Body) > 0 {
			retry.Body, _ = hreq.GetBody()
		}
		derived, _, d := p.attach(ctx, g, retry, req, vals, t, used)
		if !d.Allow {
			return nil, ev.refuse(d)
		}
		own = append(derived, secretValue{req.Credential, used})
		red = newRedactor(append(slices.Clip(hidden), own...))
		*redp = red
		hreq = retry
		resp, err = tr.RoundTrip(hreq)
	}
	if err == nil && ctx.Err() != nil {
		// The transport hands over a response that raced the context's
		// end (one that arrived while it was closing the connection):
		// past the call's deadline is a timeout, whatever came.
		resp.Body.Close()
		err = context.Cause(ctx)
	}
	if err != nil {
		return nil, ev.fail(ctx, err, red)
	}
	defer resp.Body.Close()
	// The transport stops watching ctx once it hands over a body it does
	// not frame itself (a 101's body is the raw connection). Closing the
	// body at the deadline bounds every read below whatever the server
	// sends; for ordinary bodies it is what the transport does anyway.
	defer context.AfterFunc(ctx, func() { resp.Body.Close() })()
	ev.status = resp.StatusCode
	if resp.StatusCode < 200 {
		// Only 101 Switching Protocols reaches here (the transport skips
		// interim 1xx responses under the header size limit). Its body is
		// the hijacked connection: never the tool's to read, and closed
		// now by the deferred Close. Nothing of the server's text is used.
		ev.rule = RuleUpgrade
		ev.reason = fmt.Sprintf("server answered %d (%s); http-fetch takes only final responses and never switches protocols", resp.StatusCode, http.StatusText(resp.StatusCode))
		return nil, &FetchError{Kind: FetchFailed, Message: ev.reason}
	}
	rd, declared := io.Reader(resp.Body), resp.ContentLength
	if askedGzip && declared != 0 && onlyGzip(resp.Header) {
		// Decoded as it is read, so the cap counts decoded bytes.
		rd, declared = &gunzip{r: resp.Body}, -1
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
	}
	// The cap is on the body the tool gets, after redaction: on the
	// server's bytes, the padding at which an echo turns too-large would
	// tell the tool the length of the secret inside it (the tool sees
	// the marker, not the secret). The read stops redactSlack past the
	// cap, more than redaction could shorten the body by, so stopping
	// there says "too large" for the redacted body too.
	limit := p.maxBytes
	if !red.empty() {
		limit += redactSlack
	}
	if declared > limit {
		return nil, ev.tooLarge(p.maxBytes, declared)
	}
	body, err := readCapped(rd, limit, declared)
	ev.bytes = int64(len(body))
	if err != nil {
		return nil, ev.fail(ctx, err, red)
	}
	if int64(len(body)) > limit {
		return nil, ev.tooLarge(p.maxBytes, -1)
	}
	// Tokens the gate obtained while this request was in flight (for
	// another request of the policy, or replacing the one cached) are
	// hidden too: the answer may echo them (an API showing what it was
	// sent), and the redactor was built before they existed.
	if now := g.withTokens(p, vals); !sameSecrets(now, hidden) {
		hidden = now
		red = newRedactor(append(slices.Clip(hidden), own...))
		*redp = red
	}
	if ce := contentEncoding(resp.Header); ce != "" && len(body) > 0 {
		// The coding is the server's text: redacted before it is quoted
		// (quote shortens, and a shortened secret would no longer match).
		ev.rule, ev.reason = RuleContentEncoding, fmt.Sprintf("response body uses content-encoding %s, which maiden did not ask for and cannot inspect", quote(red.String(ce)))
		return nil, &FetchError{Kind: FetchFailed, Message: ev.reason}
	}
	visible := red.Bytes(body)
	if int64(len(visible)) > p.maxBytes {
		return nil, ev.tooLarge(p.maxBytes, -1)
	}
	describeVisibleBody(resp.Header, hreq.Method, resp.StatusCode, body, visible)
	headers, bad := responseHeaders(resp.Header, red)
	if bad != "" {
		ev.rule, ev.reason = RuleHeaderEncoding, bad
		return nil, &FetchError{Kind: FetchFailed, Message: ev.reason}
	}
	ev.rule = RuleAllowed
	return &Response{
		Status:  resp.StatusCode,
		Headers: headers,
		Body:    visible,
	}, nil
}

// bodyDescriptions are response headers computed from the bytes the server
// sent: once redaction has changed the body they describe bytes the tool
// never gets, and they give away the length of what was hidden (a range's
// complete length, Express's ETag W/"<length in hex>-…") or a digest to
// test guesses of it against.
var bodyDescriptions = []string{"Content-Range", "ETag", "Content-MD5", "Digest", "Content-Digest", "Repr-Digest"}

// describeVisibleBody makes h describe the body the tool gets, visible
// (body redacted), rather than the one the server sent: a server's
// Content-Length counts a secret's bytes, so "got [REDACTED:TOK]" with
// Content-Length 98 would tell the tool the secret's length.
// Content-Length becomes len(visible), and bodyDescriptions go if
// redaction changed the body. Where the exchange has no body (HEAD, 204,
// 304) they all describe a body the gate never saw, which may hold a
// secret (a HEAD of an echo endpoint), and all go.
func describeVisibleBody(h http.Header, method string, status int, body, visible []byte) {
	if method == http.MethodHead || status == http.StatusNoContent || status == http.StatusNotModified {
		h.Del("Content-Length")
		for _, k := range bodyDescriptions {
			h.Del(k)
		}
		return
	}
	if _, ok := h["Content-Length"]; ok {
		h.Set("Content-Length", strconv.Itoa(len(visible)))
	}
	if len(body) > 0 && (len(visible) != len(body) || &visible[0] != &body[0]) {
		for _, k := range bodyDescriptions {
			h.Del(k)
		}
	}
}

// authorize asks a request's Authorizer about t. Its reason gets the
// rule appended, like the gate's own denials.
func authorize(a Authorizer, t target, credential string) Ruling {
	err := a(t.host, int(t.port), credential)
	if err == nil {
		return allowed
	}
	var r *Refusal
	if errors.As(err, &r) && r.Rule != "" {
		return deny(r.Rule, "%s", r.Reason)
	}
	return deny(RuleAuthority, "%s", err.Error())
}

// mayAttach says whether the policy lets a request to t with method carry
// the credential name: declared, and within its destinations. Both come
// before its value is read from the snapshot, so the answer for an
// undeclared name is the same whether or not the host holds a value for it.
func (p *Policy) mayAttach(name string, t target, method string) Ruling {
	if !p.declares(name) {
		return deny(RuleCredentialUndeclared, "credential %s is not in this tool's secrets", quote(name))
	}
	return p.checkDestination(name, t, method)
}

// resolveCredential resolves a credential name the policy let the request carry
// (mayAttach) from the request's snapshot of secret values. Whether the
// value can be attached is its kind's question (attach).
func resolveCredential(vals []secretValue, name string) (string, Ruling) {
	i := slices.IndexFunc(vals, func(s secretValue) bool { return s.name == name })
	if i < 0 || vals[i].value == "" {
		return "", deny(RuleCredentialMissing, "credential %s is declared but has no value on the host (set %s%s)", quote(name), SecretEnvPrefix, name)
	}
	return vals[i].value, allowed
}

// redactSlack is how far past the cap a body is read when a secret could
// be redacted from it: more than the markers of any plausible number of
// echoes could save (a body that is over the cap by more is over it
// after redaction too).
const redactSlack = 64 << 10

// readCapped reads at most max+1 bytes, so the caller can tell "exactly
// max" from "more than max" without reading further. The buffer grows with
// the data rather than to the cap, except when the server declared a length.
func readCapped(r io.Reader, max, declared int64) ([]byte, error) {
	size := int64(32 << 10)
	if declared >= 0 {
		size = declared + 1
	}
	buf := make([]byte, 0, min(size, max+1))
	lr := io.LimitReader(r, max+1)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), max+1-int64(len(buf))))+1)
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// codings are the codings h's Content-Encoding lines name, all of them in
// order, identity left out.
func codings(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				out = append(out, c)
			}
		}
	}
	return out
}

// onlyGzip reports whether h's Content-Encoding lines together name one
// coding, gzip: the one coding the gate asked for, applied once.
func onlyGzip(h http.Header) bool {
	c := codings(h)
	return len(c) == 1 && strings.EqualFold(c[0], "gzip")
}

// gunzip decodes a gzip body as it is read, starting at the first Read
// (as net/http's own decoding does); an empty body is an empty body.
type gunzip struct {
	r  io.Reader
	zr *gzip.Reader
}

func (g *gunzip) Read(p []byte) (int, error) {
	if g.zr == nil {
		zr, err := gzip.NewReader(g.r)
		if err != nil {
			return 0, err
		}
		g.zr = zr
	}
	return g.zr.Read(p)
}

// contentEncoding returns the codings of a body the gate did not decode,
// or "" for an identity body.
func contentEncoding(h http.Header) string {
	return strings.Join(codings(h), ", ")
}

// responseHeaders flattens h in name order, redacting names and values.
// A value that is not valid UTF-8 after redaction (legal obs-text bytes,
// such as a Latin-1 file name) refuses the whole response: the tool gets
// header values as component strings, and any re-encoding the gate chose
// would be a value the server never sent. bad says which header, naming
// it redacted, and where the first invalid byte is.
func responseHeaders(h http.Header, red *redactor) (out []Header, bad string) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		name := red.String(k)
		for _, v := range h[k] {
			v = red.String(v)
			if !utf8.ValidString(name) || !utf8.ValidString(v) {
				return nil, fmt.Sprintf("response header %s has a value that is not valid UTF-8 (byte %d); http-fetch passes header values as UTF-8 text", quote(name), invalidUTF8At(v))
			}
			out = append(out, Header{Name: name, Value: v})
		}
	}
	return out, ""
}

// invalidUTF8At returns the offset of the first byte of s that does not
// start a valid UTF-8 sequence, or -1.
func invalidUTF8At(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i
			}
		}
	}
	return -1
}

// rawHost is what the audit log shows for a URL that did not normalise:
// the host as written, never the query.
func rawHost(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if len(rest) > 256 {
		rest = rest[:256]
	}
	return rest
}

// event is one audit record. It holds names, never values.
type event struct {
	tool, caller, method, host, path, credential string
	port                                         int
	decision, rule, reason                       string
	status                                       int
	bytes                                        int64
	addr                                         string
	duration                                     time.Duration
	// scrub, when set, is applied to the method, host, path and reason as they
	// are recorded (scrubbed): a CONNECT's target is the text of a
	// wrapped CLI that holds its secrets' values (ConnectProxy.serve).
	scrub func(string) string
}

// scrubbed is s passed through e.scrub, if any.
func (e *event) scrubbed(s string) string {
	if e.scrub == nil {
		return s
	}
	return e.scrub(s)
}

func (e *event) setTarget(t target) {
	e.host, e.port = t.host, int(t.port)
	e.path = t.path
	if len(e.path) > 1024 {
		e.path = e.path[:1024] + "..."
	}
}

func (e *event) refuse(d Ruling) *FetchError {
	e.decision, e.rule, e.reason = "deny", d.Rule, d.Reason
	return &FetchError{Kind: FetchDenied, Message: d.Reason}
}

// redact passes the reason of an exchange that reached the network through
// red before it is logged: that is the field server text lands in (a
// quoted header, a transport error). The other fields are the tool's own
// text or the gate's; a denial happens before anything is sent.
func (e *event) redact(red *redactor) {
	if e.decision != "deny" {
		e.reason = clean(red, e.reason)
	}
}

func (e *event) tooLarge(max, declared int64) *FetchError {
	e.rule, e.reason = RuleTooLarge, fmt.Sprintf("response body is over the %d-byte cap", max)
	if declared >= 0 {
		e.reason = fmt.Sprintf("response declares %d bytes, over the %d-byte cap", declared, max)
	}
	return &FetchError{Kind: FetchTooLarge}
}

// fail classifies an error from the transport or the body.
func (e *event) fail(ctx context.Context, err error, red *redactor) *FetchError {
	var de *deniedError
	var re *resolveError
	switch {
	case errors.As(err, &de):
		return e.refuse(de.d)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || pastDeadline(ctx):
		e.rule, e.reason = RuleTimeout, "the call's deadline passed"
		return &FetchError{Kind: FetchTimeout}
	case ctx.Err() != nil:
		e.rule, e.reason = RuleFailed, "request canceled"
		return &FetchError{Kind: FetchFailed, Message: e.reason}
	case errors.As(err, &re):
		e.rule = RuleResolve
	default:
		e.rule = RuleFailed
	}
	// Transport errors can quote what the server sent.
	e.reason = red.String(err.Error())
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		e.reason += "; if the server's certificate comes from a private CA, add that CA's certificate to the tool's http_ca_files in agent.toml"
	}
	return &FetchError{Kind: FetchFailed, Message: e.reason}
}

// pastDeadline reports whether ctx's deadline has passed even if its timer
// has not fired yet: the dialer ends at the same deadline (see
// dialContext), and its error can arrive first.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

func (g *Gate) record(ctx context.Context, e *event) {
	level := slog.LevelInfo
	if e.decision == "" {
		e.decision = "allow"
	}
	if e.decision == "deny" {
		level = slog.LevelWarn
	}
	attrs := make([]slog.Attr, 0, 14)
	attrs = append(attrs, slog.String("tool", e.tool))
	if e.caller != "" {
		attrs = append(attrs, slog.String("agent", truncate(e.caller, 128)))
	}
	attrs = append(attrs,
		slog.String("method", truncate(e.scrubbed(e.method), maxMethodLength)),
		slog.String("host", e.scrubbed(e.host)),
		slog.Int("port", e.port),
		slog.String("path", e.scrubbed(e.path)),
		slog.String("credential", truncate(e.credential, 128)),
		slog.String("decision", e.decision),
		slog.String("rule", e.rule),
	)
	if e.reason != "" {
		attrs = append(attrs, slog.String("reason", e.scrubbed(e.reason)))
	}
	attrs = append(attrs,
		slog.Int("status", e.status),
		slog.Int64("bytes", e.bytes),
		slog.String("addr", e.addr),
		slog.Duration("duration", e.duration),
	)
	g.audit.LogAttrs(ctx, level, "http-fetch", attrs...)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
