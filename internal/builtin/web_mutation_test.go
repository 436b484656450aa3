package builtin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// The tests of this file were added by the mutation pass over internal/builtin (docs/security-tests.md, "Twelfth
// pass: the built-ins"): each is red with the bug named in its comment planted.

// TestWebFetchUnnamedSecretHeaderRefused: a secret header naming no secret is refused by web_fetch itself, as
// invalid_input in its own words, before the Fetcher is called: nothing is resolved or sent.
func TestWebFetchUnnamedSecretHeaderRefused(t *testing.T) {
	e := newWebEnv(t)
	m := Material{Headers: []SecretHeader{{Name: "X-Api-Key", Value: headerSecret}}}
	_, err := webCall(t, e, netOn, m, map[string]any{"url": e.url("/echo")})
	if fe := wantError(t, err, ReasonInvalidInput); !strings.Contains(fe.Message, "names no secret") {
		t.Fatalf("%v: want the refusal of a header naming no secret", err)
	}
	if n := e.fetches.Load() + e.lookups.Load() + e.conns.Load(); n != 0 {
		t.Fatalf("%d fetches, %d lookups, %d connections for a refused header", e.fetches.Load(), e.lookups.Load(), e.conns.Load())
	}
}

// TestWebFetchBinaryBodyCut: a body that is not UTF-8 is cut at MaxFetchBody like text, and marked: the agent never
// gets more than MaxFetchBody bytes of it (the gate's own cap is twice that). Red with the binary cut dropped or
// doubled: 1049576 bytes returned, truncated false.
func TestWebFetchBinaryBodyCut(t *testing.T) {
	e := newWebEnv(t)
	for _, n := range []int{MaxFetchBody + 1000, MaxFetchBody + 1, MaxFetchBody} {
		out, err := webCall(t, e, netOn, Material{}, map[string]any{"url": e.url("/binbig?n=" + strconv.Itoa(n))})
		if err != nil {
			t.Fatal(err)
		}
		raw, derr := base64.StdEncoding.DecodeString(out.Body)
		if out.Encoding != EncodingBase64 || derr != nil {
			t.Fatalf("a binary body: encoding %q, %v", out.Encoding, derr)
		}
		want, cut := min(n, MaxFetchBody), n > MaxFetchBody
		if len(raw) != want || out.Truncated != cut || !bytes.Equal(raw, bytes.Repeat([]byte{0xff}, want)) {
			t.Errorf("a binary body of %d bytes: %d bytes returned, truncated %v; want %d, truncated %v", n, len(raw), out.Truncated, want, cut)
		}
	}
}

// TestWebFetchRedactsEveryValueItKnows: web_fetch hides each value of its material, also where the gate does not
// know it (a Fetcher outside its contract, as in TestWebFetchRedactsWhatTheGateDoesNotKnow): two headers whose
// values are filed under one secret name, and a value the server puts in a response header's name.
// Red with materialRedactor's duplicate names merged (the first value left in the body) or with header names not
// redacted (the value in "X-Echo-<value>").
func TestWebFetchRedactsEveryValueItKnows(t *testing.T) {
	e := newWebEnv(t, "CONN_TOKEN") // the gate resolves CONN_TOKEN to connSecret: neither value below
	// A value that header canonicalisation leaves as it is, so that it reaches the output as sent.
	const canon = "Hdr-S3cr3t-A1b2c3d4e5f60718"
	const other = "other-s3cr3t-5a6b7c8d9e"
	m := Material{Headers: []SecretHeader{
		{Name: "X-Api-Key", Secret: "CONN_TOKEN", Value: canon},
		{Name: "X-Other-Key", Secret: "CONN_TOKEN", Value: other},
	}}
	for _, path := range []string{"/echo", "/echo-name"} {
		out, err := webCall(t, e, netOn, m, map[string]any{"url": e.url(path)})
		if err != nil {
			t.Fatal(err)
		}
		if e.lastHeaders().Get("X-Api-Key") != canon || e.lastHeaders().Get("X-Other-Key") != other {
			t.Fatalf("%s: the secret headers did not reach the server: %v", path, e.lastHeaders())
		}
		all, _ := json.Marshal(out)
		for _, leak := range []string{canon, other, base64.StdEncoding.EncodeToString([]byte(canon))} {
			if bytes.Contains(all, []byte(leak)) {
				t.Errorf("%s: output holds %q: %s", path, leak, all)
			}
		}
		if !strings.Contains(string(all), "[REDACTED:CONN_TOKEN]") {
			t.Errorf("%s: output %s lacks the marker", path, all)
		}
	}
}

// TestWebFetchErrorsLeaveTheFragmentOut: an error names the URL without its query and without its fragment (the
// caller's own keys, which errors would carry into audit records). Red with only "?" cut: the target kept
// "#caller-key".
func TestWebFetchErrorsLeaveTheFragmentOut(t *testing.T) {
	e := newWebEnv(t)
	for _, u := range []string{"https://evil.example.net/p#caller-key", "https://evil.example.net/p#frag?caller-key", "https://evil.example.net/p?caller-key#frag"} {
		_, err := WebFetch(context.Background(), netOn, []byte(`{"url":"`+u+`"}`), e.fetch, Material{})
		fe := wantError(t, err, ReasonFetchDenied)
		if fe.Target != "https://evil.example.net/p" || strings.Contains(err.Error(), "caller-key") {
			t.Errorf("%s: target %q, error %v; want https://evil.example.net/p", u, fe.Target, err)
		}
	}
}
