package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Fake credentials in each format, built at run time so that no
// credential-shaped literal sits in the source.
var (
	awsID      = "AKIA" + "IOSFODNN7EXAMPLE"
	awsSecret  = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
	ghp        = "ghp_" + strings.Repeat("A1b2C3d4E5f6", 3)
	ghs        = "ghs_" + strings.Repeat("Zz09", 9)
	gho        = "gho_" + strings.Repeat("q", 36)
	ghPAT      = "github_pat_" + strings.Repeat("B", 22) + "_" + strings.Repeat("c9", 29) + "d"
	slack      = "xoxb-" + "123456789012-1234567890123-" + strings.Repeat("AbCd", 6)
	stripe     = "sk_live_" + strings.Repeat("4eC39HqLyjWDarjtT1zdp7dc", 1)
	google     = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
	jwt        = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ" + "." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	pemBody    = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nZ1BjP5CE/Wm/Rr500P\n"
	pem        = "-----BEGIN RSA " + "PRIVATE KEY-----\n" + pemBody + "-----END RSA PRIVATE KEY-----"
	pemOpenSSH = "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
)

func newBuiltin(t testing.TB) *Redactor {
	t.Helper()
	r, err := New(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBuiltins(t *testing.T) {
	r := newBuiltin(t)
	tests := []struct{ in, want string }{
		{"key " + awsID + " here", "key [REDACTED:aws-access-key-id] here"},
		{"aws_secret_access_key = " + awsSecret + "\n", "aws_secret_access_key = [REDACTED:aws-secret-key]\n"},
		{`AWS_SECRET_ACCESS_KEY="` + awsSecret + `"`, `AWS_SECRET_ACCESS_KEY="[REDACTED:aws-secret-key]"`},
		{`{"AccessKeyId":"` + awsID + `","SecretAccessKey":"` + awsSecret + `"}`, `{"AccessKeyId":"[REDACTED:aws-access-key-id]","SecretAccessKey":"[REDACTED:aws-secret-key]"}`},
		{"token: " + ghp, "token: [REDACTED:github-token]"},
		{ghs + " " + gho, "[REDACTED:github-token] [REDACTED:github-token]"},
		{"GH=" + ghPAT + ";", "GH=[REDACTED:github-token];"},
		{"slack " + slack, "slack [REDACTED:slack-token]"},
		{"stripe: " + stripe + ".", "stripe: [REDACTED:stripe-key]."},
		{"https://maps.example/api?key=" + google + "&q=x", "https://maps.example/api?key=[REDACTED:google-api-key]&q=x"},
		{"Authorization: Bearer " + jwt, "Authorization: Bearer [REDACTED:jwt]"},
		{"before\n" + pem + "\nafter", "before\n[REDACTED:private-key]\nafter"},
		{pemOpenSSH, "[REDACTED:private-key]"},
		{"truncated: -----BEGIN EC " + "PRIVATE KEY-----\nMHcCAQEEIBk", "truncated: [REDACTED:private-key]"},
		{"password=hunter22 next", "password=[REDACTED:password] next"},
		{`{"password": "correct horse", "user": "bob"}`, `{"password": "[REDACTED:password]", "user": "bob"}`},
		{"API_KEY: abcd1234efgh", "API_KEY: [REDACTED:password]"},
		{"db?user=x&pwd=s3cr3t!&ssl=1", "db?user=x&pwd=[REDACTED:password]&ssl=1"},
		{"client_secret='zzzzzz'", "client_secret='[REDACTED:password]'"},
		{`secret: "a b c d"`, `secret: "[REDACTED:password]"`},
		{`{"password":"abc\"def"}`, `{"password":"[REDACTED:password]"}`},
		{`{"password":"\u0068unter22"}`, `{"password":"[REDACTED:password]"}`},
		{"DB_PASSWORD=s3cr3t-value", "DB_PASSWORD=[REDACTED:password]"},
		{"export GITHUB_API_KEY=abcd1234", "export GITHUB_API_KEY=[REDACTED:password]"},
		{"temporary key " + "ASIA" + awsID[4:] + " here", "temporary key [REDACTED:aws-access-key-id] here"},
		// Matches longer than a short window: a spaced-out key name, and a
		// long value, are redacted whole.
		{"aws_secret_access_key      =      " + awsSecret + "\n", "aws_secret_access_key      =      [REDACTED:aws-secret-key]\n"},
		{"password=" + strings.Repeat("s3cr3t", 50) + " next", "password=[REDACTED:password] next"},
	}
	for _, tt := range tests {
		if got := r.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// Near-misses: text shaped like a credential that is not one stays.
func TestNearMisses(t *testing.T) {
	r := newBuiltin(t)
	for _, in := range []string{
		"AKIA" + "IOSFODNN7EXAMPL",              // 15 characters
		"AKIA" + "iosfodnn7example",             // lower case
		"XAKIA" + "IOSFODNN7EXAMPLE",            // inside a word
		"ghp_" + strings.Repeat("a", 35),        // too short
		"ghx_" + strings.Repeat("a", 36),        // no such prefix
		"github_pat_" + strings.Repeat("B", 20), // too short
		"xoxo-hugs-and-kisses",
		"sk_test_" + strings.Repeat("4eC39HqLyjWDarjtT1zdp7dc", 1), // test keys are not secret
		"sk_live_short",
		"AIza" + "SyD-9tSrke72PouQMnMX",
		"eyJhbGciOiJIUzI1NiJ9 is only a header",
		"-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"passwordless login is enabled",
		"password_reset_url=https://example.test/reset",
		"password=",
		"password: abc",
		`{"password": null, "api_key": true}`,
		"the secret of the garden",
		"aws_secret_access_key = tooshort",
		"already password=[REDACTED:db]",
		"ordinary output: 42 rows, 3.5 s, cities Paris and Rome",
	} {
		if got := r.Redact(in); got != in {
			t.Errorf("near-miss %q was changed to %q", in, got)
		}
	}
}

// A secret inside a JSON string, escaped any way a JSON encoder may write
// it, is still found; the result stays valid JSON.
func TestJSONEscaped(t *testing.T) {
	r := newBuiltin(t)
	uEsc := func(s string) string { // every character as \uXXXX
		var b strings.Builder
		for _, c := range s {
			fmt.Fprintf(&b, `\u%04x`, c)
		}
		return b.String()
	}
	inner := `{"password":"hunter22","token":"` + ghp + `"}`
	innerJSON, _ := json.Marshal(inner)
	double, _ := json.Marshal(string(innerJSON))
	tests := []struct {
		name, in string
		gone     []string
	}{
		{"u-escaped token", `{"out":"` + uEsc(ghp) + `"}`, []string{ghp, uEsc(ghp)}},
		{"partly escaped", `{"out":"gh\u0070_` + ghp[4:] + `"}`, []string{ghp[4:]}},
		{"escaped slash in aws secret", `{"out":"aws_secret_access_key=` + strings.ReplaceAll(awsSecret, "/", `\/`) + `"}`, []string{"K7MDENG"}},
		{"json in json", `{"log":` + string(innerJSON) + `}`, []string{"hunter22", ghp}},
		{"json in json in json", `{"log":` + string(double) + `}`, []string{"hunter22", ghp}},
		{"pem with escaped newlines", `{"key":` + mustJSON(pem) + `}`, []string{"MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi"}},
		{"u-escaped AKIA", `["\u0041KIA` + awsID[4:] + `"]`, []string{awsID[4:]}},
	}
	for _, tt := range tests {
		got := r.Redact(tt.in)
		for _, g := range tt.gone {
			if strings.Contains(got, g) {
				t.Errorf("%s: %q still holds %q", tt.name, got, g)
			}
		}
		if !strings.Contains(got, "[REDACTED:") {
			t.Errorf("%s: no marker in %q", tt.name, got)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: the result is not valid JSON: %q", tt.name, got)
		}
	}
	// A JSON string with escapes but no secret is left byte for byte.
	clean := `{"out":"caf\u00e9 \"quoted\" \\ done"}`
	if got := r.Redact(clean); got != clean {
		t.Errorf("clean escaped JSON changed: %q", got)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestOverlappingMatchesMergedWhole: two matches that overlap are replaced
// as one span to the farther end, so no tail of the longer one is left.
func TestOverlappingMatchesMergedWhole(t *testing.T) {
	r, err := New([]Pattern{{Name: "head", Expr: `abc\d+`}, {Name: "tail", Expr: `\d+xyz`}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Redact("see abc123xyz end"), "see [REDACTED:head] end"; got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
}

func TestOperatorPatterns(t *testing.T) {
	r, err := New([]Pattern{
		{Name: "employee-id", Expr: `\bEMP-[0-9]{6}\b`},
		{Name: "internal-host", Expr: `(?P<secret>[a-z0-9-]+)\.corp\.example\b`},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	in := "EMP-123456 on db-7.corp.example, EMP-12345 and " + ghp
	want := "[REDACTED:employee-id] on [REDACTED:internal-host].corp.example, EMP-12345 and " + ghp
	if got := r.Redact(in); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if _, n := r.Count(in); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	for _, bad := range []struct {
		p   Pattern
		msg string
	}{
		{Pattern{"x", `(`}, "missing closing )"},
		{Pattern{"x", `a(?=b)`}, "invalid or unsupported Perl syntax"},
		{Pattern{"x", `(a)\1`}, "invalid escape"},
		{Pattern{"Bad Name", `a`}, "name"},
		{Pattern{"x", ``}, "empty"},
		{Pattern{"x", `a*`}, "matches the empty string"},
		{Pattern{"x", strings.Repeat("a", MaxPatternLen+1)}, "longer than the limit"},
		{Pattern{"x", `((a{100}){100}){100}`}, ""},
		{Pattern{"x", strings.Repeat(`[a-z]{1000}`, 25)}, "instructions"},
	} {
		_, err := New([]Pattern{{"ok", "ok"}, bad.p}, false)
		var pe *Error
		if !errors.As(err, &pe) || pe.Index != 1 || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%+v: %v, want an *Error for pattern 2 containing %q", bad.p, err, bad.msg)
		}
	}
	many := make([]Pattern, MaxPatterns+1)
	for i := range many {
		many[i] = Pattern{fmt.Sprint("p", i), "x"}
	}
	if _, err := New(many, false); err == nil {
		t.Error("too many patterns accepted")
	}
}

// Linear time: adversarial inputs for each detector take time
// proportional to their size (RE2 guarantees it; this guards the
// JSON-string pairing and the overlap handling around it).
func TestLinearTime(t *testing.T) {
	r := newBuiltin(t)
	inputs := map[string]func(n int) string{
		"quotes and backslashes": func(n int) string { return strings.Repeat(`"\`, n/2) },
		"escaped quotes":         func(n int) string { return strings.Repeat(`\"`, n/2) },
		"unterminated pem":       func(n int) string { return strings.Repeat("-----BEGIN PRIVATE KEY-----", n/27) },
		"password prefixes":      func(n int) string { return strings.Repeat("password=", n/9) },
		"aws prefixes":           func(n int) string { return strings.Repeat("aws_secret=", n/11) },
		"jwt-ish":                func(n int) string { return strings.Repeat("eyJaaaaaaaaaaa.", n/15) },
		"many strings":           func(n int) string { return strings.Repeat(`"a\n",`, n/6) },
	}
	for name, gen := range longValueInputs {
		inputs[name] = gen
	}
	for name, gen := range inputs {
		small, big := gen(1<<12), gen(1<<16) // 16× apart; larger sizes cost minutes under -race
		// 16× the input: allow up to 64× the time (noise, cache), far
		// below the 256× of a quadratic. A machine busy with other tests
		// can stall one measurement past that, so a pair over the bound
		// is measured again, up to three times: a quadratic is over it
		// every time.
		var ts, tb time.Duration
		for range 3 {
			ts = timeIt(func() { r.Redact(small) })
			tb = timeIt(func() { r.Redact(big) })
			if tb <= 64*ts || tb.Milliseconds() <= 20 {
				break
			}
		}
		if tb > 64*ts && tb.Milliseconds() > 20 {
			t.Errorf("%s: %v for 4 KiB, %v for 64 KiB, three times: not linear", name, ts, tb)
		}
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("password=" + "hunter22")
	f.Add(`{"out":"\u0067hp_` + strings.Repeat("a", 36) + `"}`)
	f.Add(pem)
	f.Add(`"\"\\"`)
	r := newBuiltin(f)
	f.Fuzz(func(t *testing.T, s string) {
		out := r.Redact(s)
		// Idempotent: redacting again finds nothing new.
		if again := r.Redact(out); again != out {
			t.Fatalf("not idempotent:\n%q\n%q\n%q", s, out, again)
		}
		// Valid JSON stays valid JSON.
		if json.Valid([]byte(s)) && !json.Valid([]byte(out)) {
			t.Fatalf("valid JSON became invalid:\n%q\n%q", s, out)
		}
		// A github token embedded anywhere is gone.
		tok := "ghp_" + strings.Repeat("Q", 36)
		if strings.Contains(r.Redact(s+" "+tok+" "), tok) {
			t.Fatalf("token survived after %q", s)
		}
	})
}
