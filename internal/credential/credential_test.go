package credential

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHMACSignRFC4231: the HMAC under a secret's value, against the
// published test vectors of RFC 4231, test case 2 (key "Jefe").
func TestHMACSignRFC4231(t *testing.T) {
	msg := []byte("what do ya want for nothing?")
	for alg, want := range map[string]string{
		"sha256": "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
		"sha512": "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
	} {
		if got := HMACSign(alg, []byte("Jefe"), msg); got != want {
			t.Errorf("%s: got %s, want %s", alg, got, want)
		}
	}
}

// TestApplyRefusesBadValues: a value that would break a header line is
// refused as ErrInvalidValue, and no header is set.
func TestApplyRefusesBadValues(t *testing.T) {
	for _, s := range []Spec{{}, {Kind: Header, Header: "X-Key"}, {Kind: Basic, Username: "u"}} {
		r := &http.Request{Method: "GET", URL: &url.URL{Path: "/"}, Header: http.Header{}}
		if _, err := s.Apply(r, nil, Values{Value: "a\r\nX-Evil: 1"}, time.Now()); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("%s: %v", s.Kind, err)
		}
		if len(r.Header) != 0 {
			t.Errorf("%s: headers set: %v", s.Kind, r.Header)
		}
	}
}

// ExampleHMACCanonical shows the string kind "hmac" signs.
func ExampleHMACCanonical() {
	fmt.Println(HMACCanonical("sha256", "POST", "/v1/orders?id=7", 1700000000, []byte(`{"qty":3}`)))
	// Output:
	// POST
	// /v1/orders?id=7
	// 1700000000
	// 0fb24fa07a4a24da9a3ff773eac8e762f3fd262d6543983e7cd142dc45f70752
}

// TestCheckRefuses: a credential's description that would let it be
// attached where maiden frames the request itself, sent to a token
// service in clear text, or attached ambiguously is refused, saying why.
func TestCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want string // "" when the spec is fine
	}{
		{"a header of its own", Spec{Kind: Header, Header: "X-Api-Key"}, ""},
		{"Authorization as the header", Spec{Kind: Header, Header: "Authorization", Template: "token {value}"}, ""},
		{"a header maiden frames the request with", Spec{Kind: Header, Header: "Content-Length"}, `"Content-Length" is a header maiden sets or refuses itself`},
		{"the Host header", Spec{Kind: Header, Header: "host"}, `"host" is a header maiden sets or refuses itself`},
		{"a CGI spelling of a framing header", Spec{Kind: Header, Header: "transfer_encoding"}, `"transfer_encoding" is a header maiden sets or refuses itself`},
		{"a Proxy- header", Spec{Kind: Header, Header: "Proxy-Token"}, `"Proxy-Token" is a header maiden sets or refuses itself`},
		{"not a header name", Spec{Kind: Header, Header: "X Api"}, `"X Api" is not an HTTP header name`},
		{"a template with the value twice", Spec{Kind: Header, Header: "X-Api-Key", Template: "{value} {value}"}, "template must hold {value} exactly once"},
		{"an hmac signature over a framing header", Spec{Kind: HMAC, Algorithm: "sha256", SignatureHeader: "Cookie"}, `"Cookie" is a header maiden sets or refuses itself`},
		{"a basic username with ':'", Spec{Kind: Basic, Username: "ann:admin"}, "username may not hold ':'"},
		{"an oauth2 token service over http", Spec{Kind: OAuth2, TokenURL: "http://auth.example.com/token", ClientID: "c"}, "token_url must be an https URL"},
		{"a client secret with client credentials", Spec{Kind: OAuth2, TokenURL: "https://auth.example.com/token", ClientID: "c", Grant: GrantClientCredentials, ClientSecret: true}, "client_secret is for grant refresh_token"},
		{"mtls without its certificate", Spec{Kind: MTLS}, "kind mtls needs cert_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestApplyReturnsWhatItDerived: what attaching a credential derives from
// the secret's value (the encoded pair, a signature, a signing key) is
// returned, so the gate redacts it from an echo as it redacts the value;
// an empty value (a key) signs nothing.
func TestApplyReturnsWhatItDerived(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	req := func() *http.Request {
		return &http.Request{Method: "GET", URL: &url.URL{Scheme: "https", Host: "api.example.com", Path: "/v1/x"}, Host: "api.example.com", Header: http.Header{}}
	}
	for _, tc := range []struct {
		name string
		spec Spec
		sent func(*http.Request) []string // the derived values as sent
	}{
		{"basic", Spec{Kind: Basic, Username: "ann"}, func(r *http.Request) []string {
			return []string{strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")}
		}},
		{"hmac", Spec{Kind: HMAC, Algorithm: "sha256"}, func(r *http.Request) []string { return []string{r.Header.Get(DefaultSignatureHeader)} }},
		{"sigv4", Spec{Kind: SigV4, AccessKeyID: "AKIDEXAMPLE", Region: "eu-west-1", Service: "execute-api"}, func(r *http.Request) []string {
			a := r.Header.Get("Authorization")
			return []string{a[strings.LastIndex(a, "Signature=")+len("Signature="):]}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req()
			derived, err := tc.spec.Apply(r, nil, Values{Value: "s3cret-value"}, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tc.sent(r) {
				if v == "" || !slices.Contains(derived, v) {
					t.Errorf("%q was sent but not returned for redaction (returned %q)", v, derived)
				}
			}
			if tc.spec.Kind == SigV4 && (len(derived) != 2 || len(derived[1]) != 64) {
				t.Errorf("sigv4 returned %q, want its signature and its 32-byte signing key in hex", derived)
			}
			if _, err := tc.spec.Apply(req(), nil, Values{}, now); tc.spec.Kind != Basic && !errors.Is(err, ErrInvalidValue) {
				t.Errorf("an empty value: %v, want %v", err, ErrInvalidValue)
			}
		})
	}
}
