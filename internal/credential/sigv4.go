package credential

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4, written from AWS's published description
// ("Create a signed AWS API request", IAM user guide): the canonical
// request, the string to sign, the signing key derived from the secret
// key, date, region and service. It signs the request the gate built, as
// it will be sent: the escaped path and query on the wire, the Host the
// gate set (the checked host), every header present (the tool's and the
// ones added here) but those a proxy or the transport may change, and the
// body's SHA-256.

const (
	sigV4Algorithm = "AWS4-HMAC-SHA256"
	amzDateFormat  = "20060102T150405Z"
)

// sigV4Unsigned are headers not signed: the transport or an intermediary
// may add or change them (as the AWS SDKs leave them out too).
var sigV4Unsigned = []string{"authorization", "user-agent", "x-amzn-trace-id", "expect", "transfer-encoding", "accept-encoding", "content-length"}

func (s Spec) signV4(r *http.Request, body []byte, v Values, now time.Time) ([]string, error) {
	if v.Value == "" || s.AccessKeyID == "" || (s.SessionToken && v.SessionToken == "") || !HeaderValue(v.SessionToken) {
		return nil, ErrInvalidValue
	}
	now = now.UTC()
	amzDate := now.Format(amzDateFormat)
	day := amzDate[:8]
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])

	// The headers this kind owns: whatever the tool put there is replaced.
	for _, k := range []string{"X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256", "Authorization"} {
		r.Header.Del(k)
	}
	r.Header.Set("X-Amz-Date", amzDate)
	r.Header.Set("X-Amz-Content-Sha256", payload)
	if s.SessionToken {
		r.Header.Set("X-Amz-Security-Token", v.SessionToken)
	}

	names, canonHeaders := sigV4Headers(r, len(body))
	signed := strings.Join(names, ";")
	canonPath := r.URL.EscapedPath()
	if canonPath == "" {
		canonPath = "/"
	}
	if s.Service != "s3" {
		// Every service but S3 signs the path escaped once more.
		canonPath = awsEscape(canonPath, true)
	}
	canonical := strings.Join([]string{r.Method, canonPath, sigV4Query(r.URL.RawQuery), canonHeaders, signed, payload}, "\n")
	scope := day + "/" + s.Region + "/" + s.Service + "/aws4_request"
	crHash := sha256.Sum256([]byte(canonical))
	toSign := sigV4Algorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(crHash[:])

	key := hmacSHA256([]byte("AWS4"+v.Value), day)
	key = hmacSHA256(key, s.Region)
	key = hmacSHA256(key, s.Service)
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))

	r.Header.Set("Authorization", sigV4Algorithm+" Credential="+s.AccessKeyID+"/"+scope+", SignedHeaders="+signed+", Signature="+sig)
	return []string{sig, hex.EncodeToString(key)}, nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// sigV4Headers returns the signed header names (lower case, sorted) and
// the canonical headers block (each "name:value\n", values trimmed with
// inner runs of spaces collapsed, repeated headers joined by ",").
// Content-Length is signed when there is a body, as it is sent.
func sigV4Headers(r *http.Request, bodyLen int) ([]string, string) {
	vals := map[string][]string{"host": {r.Host}}
	if bodyLen > 0 {
		vals["content-length"] = []string{strconv.Itoa(bodyLen)}
	}
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if slices.Contains(sigV4Unsigned, lk) {
			continue
		}
		vals[lk] = append(vals[lk], vs...)
	}
	names := make([]string, 0, len(vals))
	for k := range vals {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k)
		b.WriteByte(':')
		for i, v := range vals[k] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strings.Join(strings.Fields(v), " "))
		}
		b.WriteByte('\n')
	}
	return names, b.String()
}

// sigV4Query is the canonical query: each name and value decoded as a
// server would, encoded with only unreserved characters left as they are
// (space as %20), and the encoded pairs sorted.
func sigV4Query(raw string) string {
	q, _ := url.ParseQuery(raw) // the pairs a server would read; a broken pair is dropped by both sides
	var pairs [][2]string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, [2]string{awsEscape(k, false), awsEscape(v, false)})
		}
	}
	// By encoded name, then encoded value ("a" before "a-b", which sorting
	// the joined "a=..." strings would get wrong).
	slices.SortFunc(pairs, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p[0] + "=" + p[1]
	}
	return strings.Join(out, "&")
}

// awsEscape percent-encodes every byte of s but A-Z a-z 0-9 - _ . ~ (and
// '/' when keepSlash), in upper-case hex.
func awsEscape(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || keepSlash && c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
