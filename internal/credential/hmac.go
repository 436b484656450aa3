package credential

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"time"
)

// Default headers of an HMAC signature and its timestamp.
const (
	DefaultSignatureHeader = "X-Signature"
	DefaultTimestampHeader = "X-Timestamp"
)

// HMACAlgorithms are the algorithms kind "hmac" takes.
var HMACAlgorithms = []string{"sha256", "sha512"}

func hashFor(alg string) func() hash.Hash {
	if alg == "sha512" {
		return sha512.New
	}
	return sha256.New
}

// HMACCanonical is the string kind "hmac" signs, four lines joined by
// "\n" with no trailing newline:
//
//	METHOD                  as sent, e.g. POST
//	REQUEST-TARGET          the escaped path and query as sent: /v1/orders?id=7
//	TIMESTAMP               Unix seconds, decimal, as in the timestamp header
//	BODY-HASH               lower-case hex of the algorithm's digest of the body
//	                        (of no bytes when there is no body)
//
// The signature header carries the lower-case hex HMAC of this string
// under the secret's value (its bytes as they are). A verifier recomputes
// it from the request it received and compares in constant time; it
// should also refuse a timestamp far from its clock.
func HMACCanonical(alg, method, target string, ts int64, body []byte) string {
	h := hashFor(alg)()
	h.Write(body)
	return method + "\n" + target + "\n" + strconv.FormatInt(ts, 10) + "\n" + hex.EncodeToString(h.Sum(nil))
}

// HMACSign is the hex HMAC of msg under key with alg.
func HMACSign(alg string, key, msg []byte) string {
	m := hmac.New(hashFor(alg), key)
	m.Write(msg)
	return hex.EncodeToString(m.Sum(nil))
}

// HMACHeaders are the headers kind "hmac" puts its signature and its
// timestamp in, the defaults filled in.
func (s Spec) HMACHeaders() (signature, timestamp string) {
	signature, timestamp = s.SignatureHeader, s.TimestampHeader
	if signature == "" {
		signature = DefaultSignatureHeader
	}
	if timestamp == "" {
		timestamp = DefaultTimestampHeader
	}
	return signature, timestamp
}

func (s Spec) signHMAC(r *http.Request, body []byte, key string, now time.Time) ([]string, error) {
	if key == "" {
		return nil, ErrInvalidValue
	}
	sigH, tsH := s.HMACHeaders()
	ts := now.Unix()
	sig := HMACSign(s.Algorithm, []byte(key), []byte(HMACCanonical(s.Algorithm, r.Method, r.URL.RequestURI(), ts, body)))
	r.Header.Set(tsH, strconv.FormatInt(ts, 10))
	r.Header.Set(sigH, sig)
	return []string{sig}, nil
}
