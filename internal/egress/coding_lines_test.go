package egress

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A server that lists its codings on two Content-Encoding lines ("gzip"
// then "gzip": the body was gzipped twice) must not get past the gate's
// rule that a body in a coding it did not decode is refused: the transport
// reads only the first line, decodes once and deletes every line, so the
// tool would get the inner gzip stream with an echoed secret in it,
// compressed where the redactor cannot see it.
func TestContentCodingOnTwoLines(t *testing.T) {
	e := newEnv(t)
	e.secrets["API_TOKEN"] = testSecret
	inner := gzipped(t, []byte("echo "+testSecret), 1)
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Encoding"] = []string{"gzip", "gzip"}
		w.Write(gzipped(t, inner, 1))
	}, false)
	e.res.set("api.example.com", "127.0.0.1")
	rules := toolFor(t, s.port)
	rules.Secrets = []string{"API_TOKEN"}
	p := mustPolicy(t, rules)
	req := get(urlFor(s, "api.example.com", "/echo"))
	req.Credential, req.HasCredential = "API_TOKEN", true
	resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, req)
	if ferr == nil {
		zr, err := gzip.NewReader(bytes.NewReader(resp.Body))
		if err == nil {
			var out bytes.Buffer
			out.ReadFrom(zr)
			if strings.Contains(out.String(), testSecret) {
				t.Fatalf("the tool got a gzip stream holding the secret, unredacted: %q", out.String())
			}
		}
		t.Fatalf("two Content-Encoding lines: got a %d-byte body, want failed for content-encoding", len(resp.Body))
	}
	if ferr.Kind != FetchFailed || !strings.Contains(ferr.Message, "content-encoding") {
		t.Fatalf("got %v, want failed for content-encoding", ferr)
	}
}
