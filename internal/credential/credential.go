// Package credential is how the host attaches a secret to an outgoing
// request (issue 26): a bearer token, a named header, HTTP basic, an HMAC
// signature or AWS Signature Version 4. It is pure: it gets the request
// the egress gate built from the parts it checked, the secret's value and
// its parts from the host's store, and the time, and it sets headers. It
// never sends anything, never reads the environment, and returns every
// value it derived (a signature, a signing key, an encoded header) so the
// gate can redact those too. mTLS (a client certificate on the
// connection) and OAuth 2.0 (an access token obtained over the network)
// are the gate's: Spec only describes them.
//
//	spec := credential.Spec{Kind: credential.HMAC, Algorithm: "sha256"}
//	derived, err := spec.Apply(req, body, credential.Values{Value: key}, time.Now())
package credential

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Kind is how a secret is attached.
type Kind string

// The kinds of [secrets.NAME]. The zero Kind is Bearer.
const (
	Bearer Kind = "bearer" // Authorization: Bearer <value>
	Header Kind = "header" // a named header, a template such as "token {value}"
	Basic  Kind = "basic"  // Authorization: Basic base64(username:value)
	HMAC   Kind = "hmac"   // a signature of the canonical string (see hmac.go)
	SigV4  Kind = "sigv4"  // AWS Signature Version 4 (see sigv4.go)
	MTLS   Kind = "mtls"   // a client certificate; value is its PEM private key
	OAuth2 Kind = "oauth2" // an access token the host obtains (client credentials or refresh token grant)
)

// Kinds lists every kind, in the order the documentation gives them.
var Kinds = []Kind{Bearer, Header, Basic, HMAC, SigV4, MTLS, OAuth2}

// Placeholder is where a header template puts the secret's value.
const Placeholder = "{value}"

// Spec says how one secret is attached. It holds no secret value: only
// what agent.toml says (names, algorithms, regions).
type Spec struct {
	Kind Kind // "" is Bearer

	// Header: the header's name and its template (holding Placeholder
	// once; "" means the value alone).
	Header   string
	Template string

	// Basic: the user name; the value is the password.
	Username string

	// HMAC: "sha256" or "sha512"; the headers the signature and the
	// timestamp go in (defaults DefaultSignatureHeader and
	// DefaultTimestampHeader).
	Algorithm       string
	SignatureHeader string
	TimestampHeader string

	// SigV4: the access key ID, region and service; the value is the
	// secret access key. SessionToken says the secret's SESSION_TOKEN part
	// (Values.SessionToken) is sent as X-Amz-Security-Token.
	AccessKeyID  string
	Region       string
	Service      string
	SessionToken bool

	// MTLS: the PEM file of the client certificate (chain); the value is
	// the certificate's PEM private key.
	CertFile string

	// OAuth2: the token endpoint (an https URL whose host the secret's
	// destinations allow), the client ID, the scopes asked for and the
	// grant. With GrantClientCredentials ("" too) the value is the client
	// secret; with GrantRefreshToken the value is the refresh token, and
	// ClientSecret says the client authenticates with the secret's
	// CLIENT_SECRET part (Values.ClientSecret; without it the client is a
	// public one and sends only its ID). The gate obtains, caches and
	// refreshes the access token and attaches it as a bearer token.
	TokenURL     string
	ClientID     string
	Scopes       []string
	Grant        string
	ClientSecret bool
}

// The OAuth2 grants (RFC 6749 sections 4.4 and 6).
const (
	GrantClientCredentials = "client_credentials"
	GrantRefreshToken      = "refresh_token"
)

// Grants lists the OAuth2 grants maiden makes, the default first.
var Grants = []string{GrantClientCredentials, GrantRefreshToken}

// ClientSecretPart is the suffix of the secret that holds an OAuth2
// client's secret when the secret's own value is a refresh token.
const ClientSecretPart = "_CLIENT_SECRET"

// RefreshGrant reports whether s obtains tokens with a refresh token.
func (s Spec) RefreshGrant() bool { return s.Kind == OAuth2 && s.Grant == GrantRefreshToken }

// SessionTokenPart is the suffix of the secret that holds a SigV4 session
// token: the secret NAME's token is the secret NAME_SESSION_TOKEN.
const SessionTokenPart = "_SESSION_TOKEN"

// Parts are the names of the other secrets this spec of secret name reads
// (a SigV4 session token), looked up and redacted like name itself.
func (s Spec) Parts(name string) []string {
	if s.Kind == SigV4 && s.SessionToken {
		return []string{name + SessionTokenPart}
	}
	if s.RefreshGrant() && s.ClientSecret {
		return []string{name + ClientSecretPart}
	}
	return nil
}

// Values are one request's snapshot of a secret's value and its parts.
type Values struct {
	Value        string
	SessionToken string // SigV4 with Spec.SessionToken
	ClientSecret string // OAuth2 refresh grant with Spec.ClientSecret
}

// Errors of Apply. None holds a value.
var (
	// ErrInvalidValue: the secret's value cannot be sent as this kind
	// needs (a line break in a header value, say).
	ErrInvalidValue = errors.New("credential value cannot be attached")
	// ErrUnsupported: the kind is not one Apply attaches (mTLS is the
	// connection's).
	ErrUnsupported = errors.New("credential kind is not attached to a request")
)

// HeaderValue reports whether v may be sent inside a header value: no
// control characters other than tab.
func HeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// Apply attaches the credential to r, whose body is body (nil for none),
// at time now, and returns the values it derived that must be redacted
// from anything the tool or the audit log sees besides the value itself:
// an encoded header value (basic) and, for signatures, the signature and
// any key derived from the secret. It runs after every check of the gate, right before the request
// is sent, so it signs exactly what is sent: r's method, URL and Host, its
// headers and body. Headers the kind owns (Authorization, the signature's
// and timestamp's, X-Amz-*) are replaced, whatever the tool put there.
func (s Spec) Apply(r *http.Request, body []byte, v Values, now time.Time) ([]string, error) {
	switch s.Kind {
	case "", Bearer:
		if !HeaderValue(v.Value) {
			return nil, ErrInvalidValue
		}
		r.Header.Set("Authorization", "Bearer "+v.Value)
		return nil, nil // the value itself, which the gate redacts anyway
	case Header:
		t := s.Template
		if t == "" {
			t = Placeholder
		}
		h := strings.Replace(t, Placeholder, v.Value, 1)
		if !HeaderValue(v.Value) || !HeaderValue(h) {
			return nil, ErrInvalidValue
		}
		r.Header.Set(s.Header, h)
		return nil, nil
	case Basic:
		if !HeaderValue(v.Value) {
			return nil, ErrInvalidValue
		}
		enc := BasicPair(s.Username, v.Value)
		r.Header.Set("Authorization", "Basic "+enc)
		return []string{enc}, nil
	case HMAC:
		return s.signHMAC(r, body, v.Value, now)
	case SigV4:
		return s.signV4(r, body, v, now)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupported, s.Kind)
}

// BasicPair is the basic kind's encoded pair, base64(username:value),
// what its Authorization header carries after "Basic ".
func BasicPair(username, value string) string {
	return base64.StdEncoding.EncodeToString([]byte(username + ":" + value))
}
