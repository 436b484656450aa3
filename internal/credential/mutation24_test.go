package credential

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCheckRefusesMore: the rest of Check's refusals, each with its words,
// and the specs next to them that are fine.
func TestCheckRefusesMore(t *testing.T) {
	oauth := func(grant string, secret bool) Spec {
		return Spec{Kind: OAuth2, TokenURL: "https://auth.example.com/token", ClientID: "c", Grant: grant, ClientSecret: secret}
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want string // "" when the spec is fine
	}{
		{"an empty header name", Spec{Kind: Header}, "header must not be empty"},
		{"a template without the value", Spec{Kind: Header, Header: "X-Api-Key", Template: "token"}, "template must hold {value} exactly once"},
		{"a template with a line break", Spec{Kind: Header, Header: "X-Api-Key", Template: "token {value}\r\nX-Evil: 1"}, "template holds a control character"},
		{"a template with a tab", Spec{Kind: Header, Header: "X-Api-Key", Template: "token\t{value}"}, ""},
		{"a username with a line break", Spec{Kind: Basic, Username: "ann\r\nX-Evil"}, "username may not hold ':' or control characters"},
		{"an hmac algorithm not offered", Spec{Kind: HMAC, Algorithm: "md5"}, `algorithm must be one of sha256, sha512, got "md5"`},
		{"an hmac timestamp in a framing header", Spec{Kind: HMAC, Algorithm: "sha512", TimestampHeader: "Content-Length"}, `header "Content-Length" is a header maiden sets or refuses itself`},
		{"hmac with its own headers", Spec{Kind: HMAC, Algorithm: "sha512", SignatureHeader: "X-Sig", TimestampHeader: "X-Ts"}, ""},
		{"sigv4 without a region", Spec{Kind: SigV4, AccessKeyID: "AKID", Service: "s3"}, "access_key_id, region and service are required"},
		{"sigv4 with a slash in the region", Spec{Kind: SigV4, AccessKeyID: "AKID", Region: "eu/west", Service: "s3"}, `region and service are single words, got "eu/west"`},
		{"sigv4 with a slash in the service", Spec{Kind: SigV4, AccessKeyID: "AKID", Region: "eu-west-1", Service: "s3/x"}, `region and service are single words, got "s3/x"`},
		{"sigv4 with a slash in the key id", Spec{Kind: SigV4, AccessKeyID: "AKID/x", Region: "eu-west-1", Service: "s3"}, `access_key_id "AKID/x" has a character it may not hold`},
		{"sigv4 with a comma in the key id", Spec{Kind: SigV4, AccessKeyID: "AKID,SignedHeaders=host", Region: "eu-west-1", Service: "s3"}, `access_key_id "AKID,SignedHeaders=host" has a character it may not hold`},
		{"sigv4", Spec{Kind: SigV4, AccessKeyID: "AKID", Region: "eu-west-1", Service: "s3"}, ""},
		{"oauth2 without a client id", Spec{Kind: OAuth2, TokenURL: "https://auth.example.com/token"}, "token_url and client_id are required"},
		{"an oauth2 grant not offered", oauth("password", false), `grant must be one of client_credentials, refresh_token, got "password"`},
		{"oauth2 with the default grant", oauth("", false), ""},
		{"oauth2 refresh grant without a client secret", oauth(GrantRefreshToken, false), ""},
		{"oauth2 refresh grant with a client secret", oauth(GrantRefreshToken, true), ""},
		{"an unknown kind", Spec{Kind: "cookie"}, `unknown kind "cookie"`},
		{"mtls with its certificate", Spec{Kind: MTLS, CertFile: "client.pem"}, ""},
		{"a bearer token", Spec{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("Check() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPartsNamed: the other secrets a spec reads are named only when it
// reads them.
func TestPartsNamed(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want []string
	}{
		{Spec{Kind: SigV4}, nil},
		{Spec{Kind: SigV4, SessionToken: true}, []string{"AWS_SESSION_TOKEN"}},
		{Spec{Kind: OAuth2, Grant: GrantRefreshToken}, nil},
		{Spec{Kind: OAuth2, Grant: GrantRefreshToken, ClientSecret: true}, []string{"AWS_CLIENT_SECRET"}},
		{Spec{Kind: OAuth2, ClientSecret: true}, nil},
		{Spec{Kind: Bearer, SessionToken: true}, nil},
	} {
		if got := tc.spec.Parts("AWS"); !slices.Equal(got, tc.want) {
			t.Errorf("%+v.Parts(AWS) = %q, want %q", tc.spec, got, tc.want)
		}
	}
}

// TestHeaderValueBounds: every control character but tab is refused, DEL
// too; tab, space, printable ASCII and UTF-8 pass.
func TestHeaderValueBounds(t *testing.T) {
	for c := range 0x80 {
		want := c == '\t' || c >= ' ' && c != 0x7f
		if got := HeaderValue("a" + string(rune(c)) + "b"); got != want {
			t.Errorf("HeaderValue(a %#x b) = %v, want %v", c, got, want)
		}
	}
	if !HeaderValue("naïve ✓") {
		t.Error("HeaderValue refused UTF-8")
	}
}

func newRequest(method, rawURL string) *http.Request {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	return &http.Request{Method: method, URL: u, Host: u.Host, Header: http.Header{}}
}

// TestApplyPlainKindsExact: the header each plain kind sends, replacing
// whatever the tool put in it, and what it returns for redaction.
func TestApplyPlainKindsExact(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pair := base64.StdEncoding.EncodeToString([]byte("ann:pw 1"))
	for _, tc := range []struct {
		name    string
		spec    Spec
		header  string
		want    string
		derived []string
	}{
		{"bearer", Spec{}, "Authorization", "Bearer pw 1", nil},
		{"header alone", Spec{Kind: Header, Header: "X-Api-Key"}, "X-Api-Key", "pw 1", nil},
		{"header template", Spec{Kind: Header, Header: "X-Api-Key", Template: "token {value}"}, "X-Api-Key", "token pw 1", nil},
		{"basic", Spec{Kind: Basic, Username: "ann"}, "Authorization", "Basic " + pair, []string{pair}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRequest("GET", "https://api.example.com/v1")
			r.Header.Set(tc.header, "the tool's own")
			derived, err := tc.spec.Apply(r, nil, Values{Value: "pw 1"}, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Header.Values(tc.header); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("%s = %q, want only %q", tc.header, got, tc.want)
			}
			if !slices.Equal(derived, tc.derived) {
				t.Errorf("derived = %q, want %q", derived, tc.derived)
			}
		})
	}
	r := newRequest("GET", "https://api.example.com/v1")
	s := Spec{Kind: Header, Header: "X-Api-Key", Template: "token\x01{value}"}
	if _, err := s.Apply(r, nil, Values{Value: "pw"}, now); !errors.Is(err, ErrInvalidValue) || len(r.Header) != 0 {
		t.Errorf("a template with a control character: %v, headers %v; want %v and none", err, r.Header, ErrInvalidValue)
	}
}

// TestHMACSignedExactly: kind hmac's headers against a signature computed
// here with crypto/hmac over the documented canonical string, for both
// algorithms, default and named headers; a signature or timestamp the tool
// set is replaced.
func TestHMACSignedExactly(t *testing.T) {
	now := time.Unix(1700000000, 0).In(time.FixedZone("X", 5*3600))
	body := []byte(`{"qty":3}`)
	b256, b512 := sha256.Sum256(body), sha512.Sum512(body)
	for _, tc := range []struct {
		spec     Spec
		bodyHash string
		mac      func() hash.Hash
		sigH     string
		tsH      string
	}{
		{Spec{Kind: HMAC, Algorithm: "sha256"}, hex.EncodeToString(b256[:]), func() hash.Hash { return hmac.New(sha256.New, []byte("k3y")) }, "X-Signature", "X-Timestamp"},
		{Spec{Kind: HMAC, Algorithm: "sha512", SignatureHeader: "X-Sig", TimestampHeader: "X-Ts"}, hex.EncodeToString(b512[:]), func() hash.Hash { return hmac.New(sha512.New, []byte("k3y")) }, "X-Sig", "X-Ts"},
	} {
		t.Run(tc.spec.Algorithm, func(t *testing.T) {
			r := newRequest("POST", "https://api.example.com/v1/orders?id=7&x=a%20b")
			r.Header.Set(tc.sigH, "forged")
			r.Header.Set(tc.tsH, "1")
			derived, err := tc.spec.Apply(r, body, Values{Value: "k3y"}, now)
			if err != nil {
				t.Fatal(err)
			}
			m := tc.mac()
			m.Write([]byte("POST\n/v1/orders?id=7&x=a%20b\n1700000000\n" + tc.bodyHash))
			want := hex.EncodeToString(m.Sum(nil))
			if got := r.Header.Values(tc.sigH); !slices.Equal(got, []string{want}) {
				t.Errorf("%s = %q, want only %q", tc.sigH, got, want)
			}
			if got := r.Header.Values(tc.tsH); !slices.Equal(got, []string{"1700000000"}) {
				t.Errorf("%s = %q, want only 1700000000", tc.tsH, got)
			}
			if !slices.Equal(derived, []string{want}) {
				t.Errorf("derived = %q, want the signature %q", derived, want)
			}
		})
	}
}

func hmacHex(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestSigV4SignedExactly: kind sigv4's Authorization header and derived
// values against a signature computed here from a canonical request
// written out by hand (AWS's description: the path escaped twice but for
// S3, the query decoded, escaped and sorted by name then value, header
// names lower-cased and sorted, values trimmed and inner spaces
// collapsed, repeated values joined by commas, User-Agent unsigned,
// Content-Length signed with a body), with the date in UTC whatever the
// clock's zone, and the tool's own X-Amz-* headers and Authorization
// dropped.
func TestSigV4SignedExactly(t *testing.T) {
	now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600)) // 12:00 UTC
	const secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	for _, tc := range []struct {
		name, method, url, service string
		body                       string
		session                    bool
		extra                      map[string][]string // the tool's headers
		canonical                  func(payload string) string
	}{
		{
			name: "execute-api, a body, a session token", method: "POST", service: "execute-api", session: true,
			url:  "https://api.example.com/v1/a%20b/c~d?b=Q&a=1&a=0&t=~x*y&x%2Fy=1",
			body: "hi",
			extra: map[string][]string{
				"X-Custom":             {"  x   y "},
				"X-Multi":              {"one", "two"},
				"User-Agent":           {"tool/1"},
				"X-Amz-Security-Token": {"the tool's"},
				"X-Amz-Date":           {"19700101T000000Z"},
				"Authorization":        {"the tool's"},
			},
			canonical: func(p string) string {
				return "POST\n/v1/a%2520b/c~d\na=0&a=1&b=Q&t=~x%2Ay&x%2Fy=1\n" +
					"content-length:2\nhost:api.example.com\nx-amz-content-sha256:" + p + "\nx-amz-date:20261201T120000Z\n" +
					"x-amz-security-token:s3ss10n\nx-custom:x y\nx-multi:one,two\n\n" +
					"content-length;host;x-amz-content-sha256;x-amz-date;x-amz-security-token;x-custom;x-multi\n" + p
			},
		},
		{
			name: "s3, no body, no session token", method: "GET", service: "s3",
			url:   "https://bucket.example.com/a%20b/k%2Fey",
			extra: map[string][]string{"X-Amz-Security-Token": {"the tool's"}},
			canonical: func(p string) string {
				return "GET\n/a%20b/k%2Fey\n\n" +
					"host:bucket.example.com\nx-amz-content-sha256:" + p + "\nx-amz-date:20261201T120000Z\n\n" +
					"host;x-amz-content-sha256;x-amz-date\n" + p
			},
		},
		{
			name: "s3, an empty path", method: "GET", service: "s3",
			url: "https://bucket.example.com",
			canonical: func(p string) string {
				return "GET\n/\n\nhost:bucket.example.com\nx-amz-content-sha256:" + p + "\nx-amz-date:20261201T120000Z\n\n" +
					"host;x-amz-content-sha256;x-amz-date\n" + p
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRequest(tc.method, tc.url)
			r.URL.Host = "203.0.113.9" // the Host header is what is signed, not where the URL points
			for k, vs := range tc.extra {
				r.Header[k] = vs
			}
			spec := Spec{Kind: SigV4, AccessKeyID: "AKIDEXAMPLE", Region: "eu-west-1", Service: tc.service, SessionToken: tc.session}
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			derived, err := spec.Apply(r, body, Values{Value: secret, SessionToken: "s3ss10n"}, now)
			if err != nil {
				t.Fatal(err)
			}
			payload := sha256Hex(tc.body)
			canonical := tc.canonical(payload)
			scope := "20261201/eu-west-1/" + tc.service + "/aws4_request"
			toSign := "AWS4-HMAC-SHA256\n20261201T120000Z\n" + scope + "\n" + sha256Hex(canonical)
			key := hmacHex([]byte("AWS4"+secret), "20261201")
			key = hmacHex(key, "eu-west-1")
			key = hmacHex(key, tc.service)
			key = hmacHex(key, "aws4_request")
			sig := hex.EncodeToString(hmacHex(key, toSign))
			signed := strings.Split(canonical, "\n")[strings.Count(canonical, "\n")-1]
			want := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/" + scope + ", SignedHeaders=" + signed + ", Signature=" + sig
			if got := r.Header.Values("Authorization"); !slices.Equal(got, []string{want}) {
				t.Errorf("Authorization = %q\nwant only %q\nfor the canonical request\n%s", got, want, canonical)
			}
			if got := r.Header.Values("X-Amz-Date"); !slices.Equal(got, []string{"20261201T120000Z"}) {
				t.Errorf("X-Amz-Date = %q, want only 20261201T120000Z", got)
			}
			wantToken := []string(nil)
			if tc.session {
				wantToken = []string{"s3ss10n"}
			}
			if got := r.Header.Values("X-Amz-Security-Token"); !slices.Equal(got, wantToken) {
				t.Errorf("X-Amz-Security-Token = %q, want %q", got, wantToken)
			}
			if wantDerived := []string{sig, hex.EncodeToString(key)}; !slices.Equal(derived, wantDerived) {
				t.Errorf("derived = %q, want the signature and the signing key %q", derived, wantDerived)
			}
		})
	}
}

// TestSigV4RefusesBadValues: no secret key, a session token asked for but
// missing, or one that would break its header line: ErrInvalidValue and
// nothing signed.
func TestSigV4RefusesBadValues(t *testing.T) {
	spec := Spec{Kind: SigV4, AccessKeyID: "AKIDEXAMPLE", Region: "eu-west-1", Service: "s3", SessionToken: true}
	for _, v := range []Values{
		{SessionToken: "tok"},
		{Value: "k"},
		{Value: "k", SessionToken: "tok\r\nX-Evil: 1"},
	} {
		r := newRequest("GET", "https://bucket.example.com/")
		if _, err := spec.Apply(r, nil, v, time.Now()); !errors.Is(err, ErrInvalidValue) || len(r.Header) != 0 {
			t.Errorf("Apply(%q) = %v, headers %v; want %v and none", v, err, r.Header, ErrInvalidValue)
		}
	}
}

// TestApplyLeavesConnectionKindsToTheGate: mTLS and OAuth2 are not
// attached by Apply: it says so (ErrUnsupported) and sets nothing, so a
// caller that forgot them does not send the request bare believing it
// was signed.
func TestApplyLeavesConnectionKindsToTheGate(t *testing.T) {
	for _, k := range []Kind{MTLS, OAuth2, "cookie"} {
		r := newRequest("GET", "https://api.example.com/")
		derived, err := Spec{Kind: k}.Apply(r, nil, Values{Value: "v"}, time.Now())
		if !errors.Is(err, ErrUnsupported) || err.Error() != "credential kind is not attached to a request: "+string(k) || derived != nil || len(r.Header) != 0 {
			t.Errorf("Apply(%s) = %q, %v, headers %v; want nil, %v: %s, none", k, derived, err, r.Header, ErrUnsupported, k)
		}
	}
}
