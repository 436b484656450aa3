package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// benchServer is the loopback TLS server both request benchmarks use.
func benchServer(b *testing.B) (*server, *env, *Policy) {
	e := newEnv(b)
	e.secrets["API_TOKEN"] = testSecret
	s := startServer(b, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) }, false)
	e.res.set("api.example.com", "127.0.0.1")
	return s, e, mustPolicy(b, toolFor(b, s.port))
}

// BenchmarkAllowedRequest is one allowed GET with a credential through the
// gate: checks, secret lookup, redactor, pooled TLS connection, audit event.
// Compare with BenchmarkPlainClient from the same run.
func BenchmarkAllowedRequest(b *testing.B) {
	s, e, p := benchServer(b)
	req := withCred(get(urlFor(s, "api.example.com", "/v1/ping?q=1")), "API_TOKEN")
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		resp, ferr := e.gate.Fetch(ctx, p, req)
		if ferr != nil || resp.Status != 200 {
			b.Fatal(ferr)
		}
	}
}

// BenchmarkPlainClient is the same request with a plain http.Client that
// trusts the same CA and keeps connections alive, to the same server.
func BenchmarkPlainClient(b *testing.B) {
	s, _, _ := benchServer(b)
	pem, err := os.ReadFile(getPKI(b).caFile)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "api.example.com"}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	u := urlFor(s, "127.0.0.1", "/v1/ping?q=1")
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 2<<20))
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(body) == 0 {
			b.Fatal(err)
		}
	}
}

// benchBody is 2 MiB of JSON-ish text with the secret echoed a few times,
// raw and encoded.
func benchBody(clean bool) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = `abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,:{}"[]`
	var buf bytes.Buffer
	for buf.Len() < 2<<20 {
		for range 4096 {
			buf.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		if !clean {
			buf.WriteString(testSecret)
		}
	}
	return buf.Bytes()[:2<<20]
}

// BenchmarkRedact2MiB redacts a 2 MiB body that echoes the secret 500
// times; BenchmarkRedact2MiBClean one with nothing to redact.
func BenchmarkRedact2MiB(b *testing.B) {
	benchRedact(b, benchBody(false))
}

func BenchmarkRedact2MiBClean(b *testing.B) {
	benchRedact(b, benchBody(true))
}

// BenchmarkRedact2MiBEscaped is a 2 MiB JSON/HTML-like body with an escape
// ("\n", "&amp;", "\u00e9") every 40 bytes or so and the secret echoed
// in escaped forms: the worst case for the second, decoded search.
func BenchmarkRedact2MiBEscaped(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = `abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,:{}"[]`
	escapes := []string{`\n`, "&amp;", `\u00e9`, `\"`, "&#47;"}
	escSecret := strings.NewReplacer("/", `\u002f`, "+", "&#43;", `"`, `\"`).Replace(testSecret)
	var buf bytes.Buffer
	for buf.Len() < 2<<20 {
		for range 100 {
			for range 40 {
				buf.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
			buf.WriteString(escapes[rng.IntN(len(escapes))])
		}
		buf.WriteString(escSecret)
	}
	benchRedact(b, buf.Bytes()[:2<<20])
}

// BenchmarkRedact2MiBLines is 2 MiB of log-like text, a line break every
// 60 to 100 bytes and nothing to redact: the line-break check runs at
// every break. BenchmarkRedact2MiBMIME is 2 MiB of MIME base64 (76
// characters and CRLF a line) with nothing to redact: the worst case for
// it, every break is inside base64 and searched again.
func BenchmarkRedact2MiBLines(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	const alphabet = `abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,:{}"[]`
	var buf bytes.Buffer
	for buf.Len() < 2<<20 {
		for range 60 + rng.IntN(40) {
			buf.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		buf.WriteByte('\n')
	}
	benchRedact(b, buf.Bytes()[:2<<20])
}

func BenchmarkRedact2MiBMIME(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	raw := make([]byte, 3<<19)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	enc := base64.StdEncoding.EncodeToString(raw)
	var buf bytes.Buffer
	for len(enc) > 76 {
		buf.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	benchRedact(b, buf.Bytes()[:2<<20])
}

func benchRedact(b *testing.B, body []byte) {
	r := newRedactor([]secretValue{{"API_TOKEN", testSecret}, {"OTHER", "another-secret-of-this-tool"}})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r.Bytes(body)
	}
}

// BenchmarkNewRedactor is the per-request cost of building the redactor
// for a tool with two secrets.
func BenchmarkNewRedactor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		newRedactor([]secretValue{{"API_TOKEN", testSecret}, {"OTHER", "another-secret-of-this-tool"}})
	}
}
