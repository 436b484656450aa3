package egress

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/internal/credential"
)

// This file is how a credential's kind (internal/credential) meets the
// gate: the kind of each secret compiled into the policy, the parts a kind
// reads (a session token) looked up and redacted with the secret, the
// credential applied to the request the gate built right before it is
// sent, and a kind "mtls" secret's own connection pool.

// RuleCredentialKind: a secret of a kind that only http-fetch's credential
// can attach (a signing key, a client key) was named where its value
// would be sent as it is (a host built-in's secret headers), or a kind
// mtls credential was asked for over plain http.
const RuleCredentialKind = "credential-kind"

// addSpec records how d's secret is attached. The first binding with a
// kind other than bearer decides (two bindings of one secret come from
// Rules.Intersect, which keeps both sides' copies of the same table).
func (p *Policy) addSpec(d SecretDestination) error {
	s := d.Credential
	if s.Kind == "" || s.Kind == credential.Bearer {
		return nil
	}
	if _, ok := p.specs[d.Secret]; ok {
		return nil
	}
	if p.specs == nil {
		p.specs = map[string]credential.Spec{}
	}
	p.specs[d.Secret] = s
	if s.Kind != credential.MTLS {
		return nil
	}
	data, err := readCAFile(s.CertFile)
	if err != nil {
		return fmt.Errorf("secret %s: read cert_file: %v", quote(d.Secret), err)
	}
	if b, _ := pem.Decode(data); b == nil || b.Type != "CERTIFICATE" {
		return fmt.Errorf("secret %s: cert_file %s does not start with a PEM certificate", quote(d.Secret), s.CertFile)
	}
	if p.certs == nil {
		p.certs = map[string][]byte{}
	}
	p.certs[d.Secret] = data
	return nil
}

// spec is how secret name is attached (bearer when nothing says otherwise).
func (p *Policy) spec(name string) credential.Spec {
	if s, ok := p.specs[name]; ok {
		return s
	}
	return credential.Spec{Kind: credential.Bearer}
}

// secretNames are the names whose values a request of p may read: the
// declared secrets and the parts their kinds read.
func (p *Policy) secretNames() []string {
	if len(p.specs) == 0 {
		return p.secrets
	}
	out := append([]string(nil), p.secrets...)
	for _, name := range p.secrets {
		out = append(out, p.spec(name).Parts(name)...)
	}
	return out
}

// headerKindOnly refuses a secret whose value a caller means to send as a
// header itself (Request.HeaderSecrets) unless its kind is a plain token:
// a signing key or a client key sent as a header would be the key itself
// on the wire.
func (p *Policy) headerKindOnly(name string) Ruling {
	switch k := p.spec(name).Kind; k {
	case credential.Bearer, credential.Header, credential.Basic:
		return allowed
	default:
		return deny(RuleCredentialKind, "credential %s is of kind %s: only http-fetch's credential can attach it (the host signs or presents it); it is never sent as a header value", quote(name), k)
	}
}

// noSignatureHeader refuses a tool's header that is the signature header
// of one of p's kind hmac credentials, on a request that does not attach
// that credential (one that does replaces the tool's value when it signs).
// A signature covers the method, path, timestamp and body, not who sent
// it: a tool that learnt one (an API showing a later caller what an
// earlier request carried, or logging it where the tool can read) could
// otherwise send it again with its timestamp and have the request it
// signed run once more, within the server's clock window, outside what
// the credential's cards and quotas counted. Only maiden signs. SigV4
// needs no rule of its own: its signature rides in Authorization, which
// no tool may set (checkHeaders), and a header signature does not verify
// as a query one.
func (p *Policy) noSignatureHeader(header http.Header, req Request) Ruling {
	if len(p.specs) == 0 || len(header) == 0 {
		return allowed
	}
	for _, name := range p.secrets {
		s := p.spec(name)
		if s.Kind != credential.HMAC || req.HasCredential && req.Credential == name {
			continue
		}
		sig, _ := s.HMACHeaders()
		// '_' is '-' to CGI-style servers, as in checkHeaders.
		want := textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(sig, "_", "-"))
		for _, k := range slices.Sorted(maps.Keys(header)) {
			if textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(k, "_", "-")) == want {
				return deny(RuleHeaderRefused, "header %s may not be set by a tool: it carries the signature of credential %s, which only maiden makes (name the secret with the credential argument)", quote(k), quote(name))
			}
		}
	}
	return allowed
}

// attach applies credential name to hreq (whose body is body), from the
// request's snapshot vals, and returns the values it derived that must
// be redacted too. It runs after every check, right before the request is
// sent; a kind mtls credential instead selects the transport (tr).
// stale is an OAuth2 access token the API refused, never to be used again.
func (p *Policy) attach(ctx context.Context, g *Gate, hreq *http.Request, req Request, vals []secretValue, t target, stale string) (derived []secretValue, tr *http.Transport, d Ruling) {
	name, body := req.Credential, req.Body
	spec := p.spec(name)
	value, d := resolveCredential(vals, name)
	if !d.Allow {
		return nil, nil, d
	}
	invalid := deny(RuleCredentialInvalid, "the value of credential %s cannot be attached as kind %s", quote(name), spec.Kind)
	if spec.Kind == credential.MTLS {
		if t.scheme != "https" {
			return nil, nil, deny(RuleCredentialKind, "credential %s is a client certificate (kind mtls) and can only be presented over https", quote(name))
		}
		tr, err := p.mtlsTransport(g, name, value)
		if err != nil {
			return nil, nil, invalid
		}
		return nil, tr, allowed
	}
	v := credential.Values{Value: value}
	for _, part := range spec.Parts(name) {
		pv, ok := lookupValue(vals, part)
		if !ok {
			return nil, nil, deny(RuleCredentialMissing, "credential %s needs the secret %s, which has no value on the host (set %s%s)", quote(name), quote(part), SecretEnvPrefix, part)
		}
		if spec.Kind == credential.OAuth2 {
			v.ClientSecret = pv
		} else {
			v.SessionToken = pv
		}
	}
	if spec.Kind == credential.OAuth2 {
		tok, d := g.oauthToken(ctx, p, name, spec, v, req.Authorize, stale)
		if !d.Allow {
			return nil, nil, d
		}
		hreq.Header.Set("Authorization", "Bearer "+tok)
		return []secretValue{{name, tok}}, nil, allowed
	}
	out, err := spec.Apply(hreq, body, v, g.now())
	if err != nil {
		return nil, nil, invalid
	}
	for _, o := range out {
		derived = append(derived, secretValue{name, o})
	}
	return derived, nil, allowed
}

func lookupValue(vals []secretValue, name string) (string, bool) {
	for _, s := range vals {
		if s.name == name && s.value != "" {
			return s.value, true
		}
	}
	return "", false
}

// mtlsKey names one kind mtls secret's pool: per gate (as every pool),
// per secret and per value, so a rotated key gets fresh connections.
type mtlsKey struct {
	g     *Gate
	name  string
	value [sha256.Size]byte
}

// errNoKeyPair: the secret's value and the cert_file do not make a key
// pair. The cause is not kept: it could describe the key.
var errNoKeyPair = errors.New("client key does not match cert_file")

// mtlsTransport is the connection pool of the requests that present
// secret name's client certificate: only they do. The policy's ordinary
// pool never holds a connection that presented it, so a request without
// the credential (or to another host) can never ride on one.
func (p *Policy) mtlsTransport(g *Gate, name, keyPEM string) (*http.Transport, error) {
	k := mtlsKey{g: g, name: name, value: sha256.Sum256([]byte(keyPEM))}
	if t, ok := p.mtls.Load(k); ok {
		return t.(*http.Transport), nil
	}
	cert, err := tls.X509KeyPair(p.certs[name], []byte(keyPEM))
	if err != nil {
		return nil, errNoKeyPair
	}
	t, loaded := p.mtls.LoadOrStore(k, newTransport(&dialer{p: p, resolver: g.resolver, cert: &cert}, p))
	if !loaded {
		// The key was rotated: the old key's connections (which presented
		// the old certificate) are closed once idle and never reused.
		p.mtls.Range(func(o, old any) bool {
			if o := o.(mtlsKey); o.g == g && o.name == name && o != k {
				p.mtls.Delete(o)
				old.(*http.Transport).CloseIdleConnections()
			}
			return true
		})
	}
	return t.(*http.Transport), nil
}
