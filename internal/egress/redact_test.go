package egress

import (
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRedactor(t *testing.T) {
	const secret = "s3cr3t-Token/Value+=="
	r := newRedactor([]secretValue{{"TOKEN", secret}, {"EMPTY", ""}, {"TINY", "ab"}})
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	for _, tc := range []struct{ name, in, want string }{
		{"nothing to hide", "hello", "hello"},
		{"raw", "x " + secret + " y", "x [REDACTED:TOKEN] y"},
		{"twice, adjacent", secret + secret, "[REDACTED:TOKEN][REDACTED:TOKEN]"},
		{"base64 token", "Basic " + b64, "Basic [REDACTED:TOKEN]"},
		{"hex upper", strings.ToUpper("0x" + hexOf(secret)), "0X[REDACTED:TOKEN]"},
		{"percent-escaped", "q=s3cr3t-Token%2FValue%2B%3D%3D&", "q=[REDACTED:TOKEN]&"},
		{"percent-escaped, lowercase hex", "q=s3cr3t-Token%2fValue%2b%3d%3d&", "q=[REDACTED:TOKEN]&"},
		// Every byte escaped, letters and digits too, the way some
		// clients encode form values: neither QueryEscape nor PathEscape
		// writes this.
		{"percent-escaped, every byte", "q=" + escapeEveryByte(secret, "%%%02X") + "&", "q=[REDACTED:TOKEN]&"},
		{"percent-escaped, every byte, lowercase hex", "q=" + escapeEveryByte(secret, "%%%02x") + "&", "q=[REDACTED:TOKEN]&"},
		{"JSON with escaped slash", `{"t":"s3cr3t-Token\/Value+=="}`, `{"t":"[REDACTED:TOKEN]"}`},
		// "ab" is too short for its base64 fragments ("YW") to mean anything.
		{"tiny secret, no short fragments", "abc xYWz", "[REDACTED:TINY]c xYWz"},
		// A raw match and an encoded match that overlap merge into one
		// marker instead of leaving a tail of either.
		{"overlapping matches merge", secret[:6] + secret, secret[:6] + "[REDACTED:TOKEN]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.String(tc.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	var nilR *redactor
	if nilR.String("x") != "x" || string(nilR.Bytes([]byte("x"))) != "x" {
		t.Error("nil redactor changed its input")
	}
	in := []byte("clean text")
	if out := r.Bytes(in); &out[0] != &in[0] {
		t.Error("Bytes copied a body with nothing to redact")
	}
}

// TestRedactOverlapRun: a secret that overlaps itself in a long run is
// redacted entirely, with one marker, and without one record per match
// (2 MiB of matches would otherwise cost tens of megabytes).
func TestRedactOverlapRun(t *testing.T) {
	r := newRedactor([]secretValue{{"A", "aaaaaaaa"}})
	in := "x" + strings.Repeat("a", 2<<20) + "y"
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := r.String(in)
	runtime.ReadMemStats(&after)
	if got != "x[REDACTED:A]y" {
		t.Errorf("got %.60q", got)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("redacting 2 MiB allocated %d MiB", alloc>>20)
	}
}

// escapeEveryByte formats each byte of s with format ("%%%02X").
func escapeEveryByte(s, format string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

func hexOf(s string) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(digits[s[i]>>4])
		b.WriteByte(digits[s[i]&15])
	}
	return b.String()
}
