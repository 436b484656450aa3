package redact

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// valueDetectors are the built-ins whose value is scanned by hand, each
// with its whole expression anchored: the definition scan must agree with.
func valueDetectors(t testing.TB) (dets []*detector, oracles []*regexp.Regexp) {
	t.Helper()
	for i := range builtin {
		if d := &builtin[i]; d.scan != nil {
			dets = append(dets, d)
			oracles = append(oracles, regexp.MustCompile(`^(?:`+d.expr+`)`))
		}
	}
	if len(dets) == 0 {
		t.Fatal("no built-in detector scans its value")
	}
	return dets, oracles
}

// checkValueScan fails t if a detector's scanned match at the start of w
// differs from its expression's.
func checkValueScan(t testing.TB, dets []*detector, oracles []*regexp.Regexp, w string) {
	t.Helper()
	for i, d := range dets {
		ws, we, wok := 0, 0, false
		if m := oracles[i].FindStringSubmatchIndex(w); m != nil {
			// The secret group of the whole expression: the detector
			// holds no groups (it scans its value).
			ws, we = (&detector{groups: secretGroups(oracles[i])}).secret(m)
			wok = true
		}
		gs, ge, _, gok := d.matchStart(w)
		if gok != wok || gok && (gs != ws || ge != we) {
			t.Fatalf("%s on %q: scanned %v [%d:%d], the expression %v [%d:%d]", d.name, w, gok, gs, ge, wok, ws, we)
		}
	}
}

// valuePieces are what generated text is made of: keywords in any case
// (with the characters Unicode folds onto k and s), separators, quotes,
// escapes, every class boundary of the value, multi-byte and invalid UTF-8.
var valuePieces = []string{
	"password", "PassWord", "passwd", "pwd", "PWD", "passphrase", "secret", "client_secret", "client-secret",
	"clientsecret", "api_key", "API-KEY", "apikey", "access_token", "auth-token", "private_key",
	"pa\u017f\u017fword", "api_\u212aey",
	"=", ":", " = ", "\t:", " ", "\n", "\r", "\f", "\v", `"`, `'`, `\`, `\"`, `\'`, `\\`, "\\\n",
	"&", ",", ";", "<", ">", "{", "}", "[", "]", "a", "Z", "0", "/", "+", "-", "_", ".",
	"é", "日本", "\xff", "\xe2\x82", "\x00",
	"null", "[REDACTED:x]", "abcd", "hunter22",
}

// genValueText is a random text of the pieces, now and then with a long
// run that crosses the 1200-byte window, or one of more than 512
// characters (the bound values once had: a scan still capped there
// differs from the expression on it).
func genValueText(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(12) {
		switch r.IntN(10) {
		case 0:
			p := valuePieces[r.IntN(len(valuePieces))]
			b.WriteString(strings.Repeat(p, 500/len(p)+r.IntN(30)))
		case 1:
			p := valuePieces[r.IntN(len(valuePieces))]
			b.WriteString(strings.Repeat(p, (513+r.IntN(1500))/utf8.RuneCountInString(p)+1))
		default:
			b.WriteString(valuePieces[r.IntN(len(valuePieces))])
		}
	}
	return b.String()
}

// genWindow is how much of generated text from a keyword is compared: more
// than its longest run, in bytes.
const genWindow = 16 << 10

// The hand-written value scan matches exactly what the expression does,
// at every keyword of generated text (values of any length).
func TestValueScanMatchesExpression(t *testing.T) {
	dets, oracles := valueDetectors(t)
	edges := []string{
		"password=abc", "password=abcd", "password=" + strings.Repeat("a", 511), "password=" + strings.Repeat("a", 512),
		"password=" + strings.Repeat("a", 513), "password=" + strings.Repeat("é", 513), "password=" + strings.Repeat("\xff", 600),
		`password="ab"`, `password="abc"`, `password="a\"b"`, `password="` + strings.Repeat("a", 512) + `"`,
		`password="` + strings.Repeat("a", 513) + `"`, `password="` + strings.Repeat(`\"`, 512) + `"`,
		`password="` + strings.Repeat(`\"`, 513) + `"`, "password=\"ab\\\nc\"", `password="abc\`, `password="abc`,
		`password='x"y'`, `password="x'y"`, `secret : 'it''s'`, "PASSWORD\t=\t\"hunter22\"", `password"="abcd"`,
		"password=" + strings.Repeat("a", 5000), `password="` + strings.Repeat("a", 5000) + `"`, `password='` + strings.Repeat(`\'`, 3000) + `' x`,
		`password="` + strings.Repeat("a", 5000), "password=" + strings.Repeat("😀", 2000) + ";", `password="` + strings.Repeat("a", 2000) + "\\\n" + `"`,
		"password==abcd", "password= \n abcd", "pa\u017f\u017fword=abcd", "api_\u212aey=abcd", `password=""""`,
		// Whitespace around the separator past the keyword's window
		// (startWindow): the key is matched on the text, not the window.
		"secret =" + strings.Repeat(" ", 1500) + "abcdef", "password" + strings.Repeat("\t", 1300) + `: "hunter22"`,
	}
	// Every ASCII character and a multi-byte one inside a bare, a double-
	// and a single-quoted value, and escaped in the quoted ones.
	for c := range utf8.RuneSelf + 1 {
		ch := string(rune(c))
		edges = append(edges, "password=ab"+ch+"cdef", "password="+ch+"abcd", `password="ab`+ch+`cd"`, `password='ab`+ch+`cd'`,
			`password="ab\`+ch+`cd"`, `password='ab\`+ch+`cd'`)
	}
	for _, w := range edges {
		checkValueScan(t, dets, oracles, w)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	n := 0
	for range 1000 {
		text := genValueText(r)
		lower := asciiLower(text)
		for _, d := range dets {
			for _, s := range d.starts {
				for at := 0; ; at++ {
					j := strings.Index(lower[at:], s)
					if j < 0 {
						break
					}
					at += j
					checkValueScan(t, dets, oracles, text[at:min(len(text), at+genWindow)])
					n++
				}
			}
		}
	}
	t.Logf("%d keyword places compared", n)
}

func FuzzValueScan(f *testing.F) {
	f.Add("password=hunter22")
	f.Add(`secret: "a\"b c"`)
	f.Add("api_key='" + strings.Repeat("x", 520) + "'")
	f.Add("secret=" + strings.Repeat("y", 3000) + " z")
	f.Add("pwd=\xffabc")
	dets, oracles := valueDetectors(f)
	f.Fuzz(func(t *testing.T, w string) {
		checkValueScan(t, dets, oracles, w)
	})
}
