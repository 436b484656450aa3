package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// render runs an html/template with the secret as its data: the escapes a
// real server's page would carry, in each context.
func render(t *testing.T, tmpl string, data any) string {
	t.Helper()
	var b bytes.Buffer
	if err := htmltemplate.Must(htmltemplate.New("").Parse(tmpl)).Execute(&b, data); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRedactEscapedForms: a server that echoes the secret inside an HTML
// page or a JSON or JavaScript string escapes some of its characters, and
// which ones is the encoder's choice. Every such form must be redacted,
// and nothing around it touched.
func TestRedactEscapedForms(t *testing.T) {
	const secret = testSecret // tok_3f9a"<&>/+Zq~9$secret-Value
	r := newRedactor([]secretValue{{"T", secret}})
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	jsonHTML, _ := json.Marshal(secret) // \u003c \u0026 \u003e and \"
	for _, tc := range []struct{ name, in string }{
		{"html/template text", render(t, `<p>{{.}}</p>`, secret)},
		{"html/template attribute", render(t, `<a title="{{.}}">x</a>`, secret)},
		{"html/template script", render(t, `<script>var t = {{.}};</script>`, secret)},
		{"html/template JS string", render(t, `<script>var t = "{{.}}";</script>`, secret)},
		{"html/template URL query", render(t, `<a href="/x?t={{.}}">x</a>`, secret)},
		{"html/template, base64 form", render(t, `<p>{{.}}</p>`, b64)},
		{"decimal entities for / and +", strings.NewReplacer("/", "&#47;", "+", "&#43;").Replace(secret)},
		{"hex entities, upper and lower", strings.NewReplacer("/", "&#x2F;", "+", "&#x2b;", `"`, "&#X22;").Replace(secret)},
		{"named entities", strings.NewReplacer("/", "&sol;", "+", "&plus;", "&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "$", "&dollar;").Replace(secret)},
		{"numeric entity without semicolon", strings.NewReplacer("/", "&#47").Replace(secret)},
		{"encoding/json", string(jsonHTML)},
		{"JSON \\u for / and + (lower hex)", strings.NewReplacer("/", `\u002f`, "+", `\u002b`).Replace(secret)},
		{"JSON \\u for / and + (upper hex)", strings.NewReplacer("/", `\u002F`, "+", `\u002B`).Replace(secret)},
		{"JSON \\u for every character", jsonEscapeAll(secret)},
		{"JavaScript \\x", strings.NewReplacer("<", `\x3c`, ">", `\x3E`, "&", `\x26`).Replace(secret)},
		{"entity and \\u mixed", strings.NewReplacer("/", "&#47;", "+", `\u002B`, `"`, `\"`).Replace(secret)},
		{"escaped first and last characters", `\u0074` + secret[1:len(secret)-1] + "&#101;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := "before&amp;\\n" + tc.in + "\\u0041after"
			got := r.String(in)
			if !strings.Contains(got, "[REDACTED:T]") {
				t.Fatalf("not redacted: %q\nin: %q", got, in)
			}
			for _, frag := range []string{"3f9a", "Zq~9", "secret-Val", "Zq", `\u0065`} {
				if strings.Contains(got, frag) {
					t.Errorf("%q survived: %q", frag, got)
				}
			}
			// The escapes around the secret are not part of it.
			if !strings.HasPrefix(got, "before&amp;\\n") || !strings.HasSuffix(got, "\\u0041after") {
				t.Errorf("surroundings changed: %q", got)
			}
		})
	}
}

// TestRedactEscapesAnyMix escapes each character of the secret at random
// in one of the forms encoders write; every mix must be redacted exactly.
func TestRedactEscapesAnyMix(t *testing.T) {
	const secret = testSecret
	r := newRedactor([]secretValue{{"T", secret}})
	rng := rand.New(rand.NewPCG(7, 9))
	forms := []func(c byte) string{
		func(c byte) string { return string(c) },
		func(c byte) string { return fmt.Sprintf("&#%d;", c) },
		func(c byte) string { return fmt.Sprintf("&#x%X;", c) },
		func(c byte) string { return fmt.Sprintf("&#x%x;", c) },
		func(c byte) string { return fmt.Sprintf(`\u%04x`, c) },
		func(c byte) string { return fmt.Sprintf(`\u%04X`, c) },
		func(c byte) string { return fmt.Sprintf(`\x%02x`, c) },
	}
	for i := range 500 {
		var b strings.Builder
		for j := 0; j < len(secret); j++ {
			b.WriteString(forms[rng.IntN(len(forms))](secret[j]))
		}
		in := "<" + b.String() + ">"
		if got, want := r.String(in), "<[REDACTED:T]>"; got != want {
			t.Fatalf("mix %d: %q redacted to %q, want %q", i, in, got, want)
		}
	}
}

// TestRedactEscapesLeaveTextAlone: text full of escapes and no secret comes
// back as it was (the same bytes, not a copy), and a secret whose own value
// contains escape-like text is still found raw.
func TestRedactEscapesLeaveTextAlone(t *testing.T) {
	r := newRedactor([]secretValue{{"T", testSecret}, {"LIT", `a\u0041&amp;b`}})
	for _, in := range []string{
		`{"a":"line\nbreak \u00e9 \ud83d\ude00 \/ &amp; &#47; &bogus; &#xZZ; \q \u12"}`,
		"& && &# &#; &#x; \\ \\\\",
		"tok_3f9a&quot;", // a prefix of the secret, escaped: not the secret
	} {
		b := []byte(in)
		if out := r.Bytes(b); string(out) != in || &out[0] != &b[0] {
			t.Errorf("%q came back as %q", in, out)
		}
	}
	if diff := cmp.Diff(`x [REDACTED:LIT] y`, r.String(`x a\u0041&amp;b y`)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func jsonEscapeAll(s string) string {
	var b strings.Builder
	for _, c := range s {
		fmt.Fprintf(&b, `\u%04x`, c)
	}
	return b.String()
}

// FuzzRedactEscapes: whatever the text around it, an escaped secret is
// redacted, and the output never holds the secret raw.
func FuzzRedactEscapes(f *testing.F) {
	for _, s := range []string{"", "&amp;", `\u0074`, "&#", `\`, "tok_3f9a", "&#x74;ok_"} {
		f.Add(s, s)
	}
	r := newRedactor([]secretValue{{"T", testSecret}})
	escaped := jsonEscapeAll(testSecret)
	f.Fuzz(func(t *testing.T, pre, post string) {
		if strings.HasSuffix(pre, `\`) {
			return // then the first backslash is escaped itself: another text
		}
		out := r.String(pre + escaped + post)
		if !strings.Contains(out, "[REDACTED:T]") {
			t.Fatalf("not redacted: %q", out)
		}
		if strings.Contains(r.String(pre+testSecret+post), testSecret) {
			t.Fatalf("raw secret survived")
		}
	})
}

// TestRedactEscapesConcurrently hammers the pooled shadow buffers: many
// goroutines redacting escaped text at once must each get their own result.
func TestRedactEscapesConcurrently(t *testing.T) {
	r := newRedactor([]secretValue{{"T", testSecret}})
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 200 {
				pad := strings.Repeat(`x\n&amp;`, g*10+i%7)
				in := pad + jsonEscapeAll(testSecret) + pad
				if got, want := r.String(in), pad+"[REDACTED:T]"+pad; got != want {
					errs <- fmt.Errorf("goroutine %d, round %d: got %q", g, i, got)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
