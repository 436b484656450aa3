package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNormalizeHostPattern(t *testing.T) {
	ok := []struct {
		in, want string
	}{
		{"api.example.com", "api.example.com"},
		{"API.Example.COM", "api.example.com"},
		{"api.example.com.", "api.example.com"},
		{"localhost", "localhost"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"a-b.c-d.example", "a-b.c-d.example"},
		{"1e100.net", "1e100.net"},
		{"*.example.com", "*.example.com"},
		{"*.Example.com.", "*.example.com"},
		{"127.0.0.1", "127.0.0.1"},
		{"::1", "::1"},
		{"[::1]", "::1"},
		{"[2001:DB8:0:0::1]", "2001:db8::1"},
		{"2001:0db8::0001", "2001:db8::1"},
		{strings.Repeat("a", 63) + ".example", strings.Repeat("a", 63) + ".example"},
		{strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 126) + "a"}, // 253 characters, the most a name has
	}
	for _, tt := range ok {
		t.Run(tt.in, func(t *testing.T) {
			got, err := NormalizeHostPattern(tt.in)
			if err != nil {
				t.Fatalf("NormalizeHostPattern(%q) error: %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NormalizeHostPattern(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
			again, err := NormalizeHostPattern(got)
			if err != nil || again != got {
				t.Errorf("normalising %q again = %q, %v; want it unchanged", got, again, err)
			}
		})
	}

	bad := []struct {
		in, reason string
	}{
		{"", "empty"},
		{".", "empty host name"},
		{"*", "a bare '*' would allow every host"},
		{"*.", "a bare '*' would allow every host"},
		{"*.com", "a wildcard must be followed by at least two labels"},
		{"a.*.com", "'*' is only allowed as the whole first label"},
		{"**.x.com", "'*' is only allowed as the whole first label"},
		{"*x.example.com", "'*' is only allowed as the whole first label"},
		{"https://api.example.com", "must be a host name, not a URL"},
		{"api.example.com:443", "must not contain a port"},
		{"[::1]:443", "must not contain a port"},
		{"api.example.com/v1", "must not contain a path, query or fragment"},
		{"user@api.example.com", "must not contain user info ('@')"},
		{"api example.com", "must not contain spaces or control characters"},
		{" api.example.com", "must not contain spaces or control characters"},
		{"api\x00.example.com", "must not contain spaces or control characters"},
		{"b%C3%BCcher.example", "must not contain percent-escapes"},
		{"fe80::1%eth0", "IPv6 zones are not allowed"},
		{"bücher.example", "non-ASCII characters are not allowed"},
		{"\u212Aelvin.example", "non-ASCII characters are not allowed"}, // Kelvin sign lowercases to 'k'
		{"a..example.com", "empty label"},
		{".example.com", "empty label"},
		{"example.com..", "empty label"},
		{"-api.example.com", `label "-api" must not start or end with '-'`},
		{"api-.example.com", `label "api-" must not start or end with '-'`},
		{"api_v2.example.com", "invalid character '_'"},
		{strings.Repeat("a", 64) + ".example", "is 64 characters long, the maximum is 63"},
		{strings.Repeat("a.", 127) + "ab", "host name is 256 characters long, the maximum is 253"},
		{strings.Repeat("a.", 126) + "ab", "host name is 254 characters long, the maximum is 253"},
		{"127.1", "looks like an IPv4 address"},
		{"256.0.0.1", "looks like an IPv4 address"},
		{"0x7f.1", "looks like an IPv4 address"},
		{"example.0x1f", "looks like an IPv4 address"},
		{"*.1.2.3", "looks like an IPv4 address"},
		{"[127.0.0.1]", "brackets must enclose an IPv6 address"},
		{"[::1", "unbalanced '['"},
		{"1:2:3", "invalid IPv6 address"},
	}
	for _, tt := range bad {
		t.Run("bad/"+tt.in, func(t *testing.T) {
			got, err := NormalizeHostPattern(tt.in)
			if err == nil {
				t.Fatalf("NormalizeHostPattern(%q) = %q, want an error", tt.in, got)
			}
			if !errors.Is(err, ErrInvalidHostPattern) {
				t.Errorf("error %v does not wrap ErrInvalidHostPattern", err)
			}
			if !strings.Contains(err.Error(), tt.reason) || !strings.HasSuffix(err.Error(), expectedHostPattern) {
				t.Errorf("error %q: want it to contain %q and end with what is expected", err, tt.reason)
			}
		})
	}
}

func TestMatchHost(t *testing.T) {
	tests := []struct {
		pattern, host string
		want          bool
	}{
		{"api.example.com", "api.example.com", true},
		{"api.example.com", "x.api.example.com", false},
		{"api.example.com", "example.com", false},
		{"api.example.com", "api.example.co", false},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "xn--bcher-kva.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "a.b.example.com", false},
		{"*.example.com", ".example.com", false},
		{"*.example.com", "aexample.com", false},
		{"*.example.com", "a.example.com.evil", false},
		{"*.example.com", "a.notexample.com", false},
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.1", "127.0.0.2", false},
		{"::1", "::1", true},
		{"localhost", "localhost", true},
		{"", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.host, func(t *testing.T) {
			if got := MatchHost(tt.pattern, tt.host); got != tt.want {
				t.Errorf("MatchHost(%q, %q) = %v, want %v", tt.pattern, tt.host, got, tt.want)
			}
		})
	}
}

func FuzzNormalizeHostPattern(f *testing.F) {
	for _, s := range []string{
		"api.example.com", "*.example.com", "API.Example.COM.", "127.0.0.1", "[::1]", "::ffff:1.2.3.4",
		"*", "*.com", "a.*.b", "https://x.y", "x.y:80", "bücher.de", "127.1", "0x7f.1", "[fe80::1%25eth0]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := NormalizeHostPattern(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidHostPattern) {
				t.Fatalf("error %v does not wrap ErrInvalidHostPattern", err)
			}
			return
		}
		again, err := NormalizeHostPattern(p)
		if err != nil || again != p {
			t.Fatalf("NormalizeHostPattern(%q) = %q, but normalising that gives %q, %v", s, p, again, err)
		}
		if p == "" || p != strings.ToLower(p) || strings.HasSuffix(p, ".") || strings.ContainsAny(p, "[]/@%") {
			t.Fatalf("NormalizeHostPattern(%q) = %q, which is not normalised", s, p)
		}
		if !MatchHost(p, p) && !strings.HasPrefix(p, "*.") {
			t.Fatalf("exact pattern %q does not match itself", p)
		}
		if rest, ok := strings.CutPrefix(p, "*."); ok {
			if !MatchHost(p, "x."+rest) || MatchHost(p, rest) || MatchHost(p, "x.y."+rest) {
				t.Fatalf("wildcard %q matches the wrong hosts", p)
			}
		}
	})
}
