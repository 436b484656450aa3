package credential

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
