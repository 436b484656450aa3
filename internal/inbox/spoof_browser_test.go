package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/safetext"
)

// spoofCall is an approval request of tool whose arguments are input,
// rendered as maiden renders a call (grant.Render, grant.Rendering).
func spoofCall(t *testing.T, id, tool, input string) Approval {
	t.Helper()
	args, err := grant.Render([]byte(input))
	if err != nil {
		t.Fatalf("render %s: %v", input, err)
	}
	now := time.Now()
	return Approval{ID: id, Agent: "bot", Tool: tool, Rendered: grant.Rendering(args), Digest: strings.Repeat("cd", 32),
		Rule: "middleware[1] approve", Created: now, Expires: now.Add(time.Hour), State: "pending"}
}

// TestBrowserShowsSpoofedArgumentsEscaped: what an agent puts in a call's
// arguments (or a boundary request's justification) cannot make the inbox
// show a human something other than what runs. In headless Chromium, the
// page's visible text (innerText) shows every argument on its own row,
// name first, with line breaks, carriage returns, escape sequences, bidi
// overrides and isolates, zero-width characters and the line separator as
// the CLI's escapes; the real --path of an fs_write is on screen although
// its content holds 40 line breaks; a long value is cut with how many
// bytes are not shown, and "show all" shows it whole; the rendering's
// digest is the SHA-256 of the exact rendering.
func TestBrowserShowsSpoofedArgumentsEscaped(t *testing.T) {
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		if os.Getenv("MAIDEN_CI") != "" || os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed: .ci/run installs it (apt-get install chromium)")
		}
		t.Skip("chromium is not installed (apt-get install chromium); the browser test runs in CI")
	}

	long := strings.Repeat("A", 3000) + "\n--tail=\u202eend"
	f := newFake()
	f.approvals = map[string]Approval{
		// 40 line breaks push the real path under a harmless-looking one.
		"write": spoofCall(t, "write", "fs_write", `{"content":"hello --path=notes.txt`+strings.Repeat(`\n`, 40)+`","path":"/home/u/.bashrc"}`),
		// An RLO in the memo reverses what follows it on the line.
		"pay":  spoofCall(t, "pay", "pay", `{"amount":5,"memo":"rent \u202e","to":"mallory"}`),
		"mix":  spoofCall(t, "mix", "run", `{"cr":"safe\rEVIL","esc":"\u001b[2Kclean","lri":"\u2066y\u2069","lro":"\u202dx","ls":"one\u2028two","pa\u200bth":"/etc","zwj":"a\u200db","zwsp":"ad\u200bmin"}`),
		"long": spoofCall(t, "long", "fs_write", `{"content":`+jsonString(long)+`,"path":"big.txt"}`),
	}
	b := Approval{ID: "bnd_1", Kind: KindBoundary, Agent: "bot", Session: "s-1", RequestID: "r\u202e1",
		Reason: "harmless\n\n\n\nreally \u202eevil", Entries: []BoundaryEntry{{Path: "/srv/\u202ecod", Access: "write", Scope: "subtree"}},
		Created: time.Now(), Expires: time.Now().Add(time.Hour), State: "pending"}
	f.approvals[b.ID] = b
	srv := httptest.NewServer(New(f, nil))
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\n%s", what, err, html)
		}
	}
	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return s
	}
	// rows is each argument row of a request as "NAME\tVALUE" of the
	// rows' visible text.
	rows := func(id string) []string {
		t.Helper()
		s := eval(`[...document.querySelectorAll("#req-` + id + ` table.args tr")].map(tr =>
			tr.querySelector("th").innerText + "\t" + tr.querySelector("td").innerText).join("\n")`)
		return strings.Split(s, "\n")
	}
	// The browser lives as long as the context of the first Run.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	do("log in", chromedp.Navigate(srv.URL+"/ui/login"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), operatorToken), chromedp.Click(chromedp.ID("login")),
		// The logged-in layout's logout button, not any h1: the login page
		// has one too, and navigating while the login's POST is still in
		// flight aborts it (net::ERR_ABORTED).
		chromedp.WaitVisible(chromedp.ID("logout")))

	check := func(id string, want []string) {
		t.Helper()
		do("open "+id, chromedp.Navigate(srv.URL+"/ui/approvals/"+id), chromedp.WaitVisible(chromedp.ID("req-"+id)))
		got := rows(id)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("request %s's argument rows (name, value as seen):\n%q\nwant\n%q", id, got, want)
		}
		text := eval(`document.getElementById("req-` + id + `").innerText`)
		if i := strings.IndexFunc(text, func(r rune) bool { return r != '\n' && r != '\t' && safetext.Unsafe(r) }); i >= 0 {
			t.Errorf("request %s's visible text holds %q raw:\n%s", id, text[i:min(i+8, len(text))], text)
		}
		digest := sha256.Sum256([]byte(f.approvals[id].Rendered))
		if got, want := eval(`document.querySelector("#req-`+id+` dd.rendering-digest code").innerText`), "sha256:"+hex.EncodeToString(digest[:]); got != want {
			t.Errorf("request %s's rendering digest %q, want %q", id, got, want)
		}
	}

	check("write", []string{
		"--content\thello --path=notes.txt" + strings.Repeat(`\n`, 40),
		"--path\t/home/u/.bashrc",
	})
	// The real path's row is on the first screen, under the content's.
	if top := eval(`String(Math.round([...document.querySelectorAll("#req-write th")].find(th => th.innerText == "--path").getBoundingClientRect().top))`); len(top) > 3 {
		t.Errorf("the --path row starts %spx down the page: pushed off the screen", top)
	}
	check("pay", []string{"--amount\t5", `--memo` + "\t" + `rent \u202e`, "--to\tmallory"})
	check("mix", []string{
		"--cr\t" + `safe\rEVIL`,
		"--esc\t" + `\x1b[2Kclean`,
		"--lri\t" + `\u2066y\u2069`,
		"--lro\t" + `\u202dx`,
		"--ls\t" + `one\u2028two`,
		`--pa\u200bth` + "\t/etc",
		"--zwj\t" + `a\u200db`,
		"--zwsp\t" + `ad\u200bmin`,
	})

	// A long value: cut, saying how much is not shown; "show all" shows
	// all of it, escaped.
	do("open long", chromedp.Navigate(srv.URL+"/ui/approvals/long"), chromedp.WaitVisible(chromedp.ID("req-long")))
	cell := `[...document.querySelectorAll("#req-long tr")].find(tr => tr.querySelector("th").innerText == "--content").querySelector("td")`
	shown := eval(cell + `.innerText`)
	full := safetext.Escape(long)
	if !strings.HasPrefix(shown, strings.Repeat("A", 200)) || !strings.Contains(shown, " more bytes)") || strings.Contains(shown, `\u202eend`) {
		t.Errorf("the long value's cell shows %q, want its start and how many bytes are not shown", shown)
	}
	head := len(shown[:strings.Index(shown, " (")])
	if want := "(" + itoa(int64(len(long)-head)) + " more bytes)"; !strings.Contains(shown, want) {
		t.Errorf("the long value's cell %q does not say %q", shown[head:], want)
	}
	do("show all", chromedp.Click(chromedp.CSS("#req-long details.all summary")))
	if got := eval(cell + `.querySelector("code.full").innerText`); got != full {
		t.Errorf("show all shows %q, want the whole value escaped %q", got, full)
	}

	// A boundary request's justification, request ID and path.
	do("open the boundary request", chromedp.Navigate(srv.URL+"/ui/approvals/bnd_1"), chromedp.WaitVisible(chromedp.ID("req-bnd_1")))
	text := eval(`document.getElementById("req-bnd_1").innerText`)
	for _, want := range []string{`harmless\n\n\n\nreally \u202eevil`, `r\u202e1`, `/srv/\u202ecod`} {
		if !strings.Contains(text, want) {
			t.Errorf("the boundary request does not show %q:\n%s", want, text)
		}
	}
	if i := strings.IndexFunc(text, func(r rune) bool { return r != '\n' && r != '\t' && safetext.Unsafe(r) }); i >= 0 {
		t.Errorf("the boundary request's visible text holds %q raw:\n%s", text[i:min(i+8, len(text))], text)
	}
}

// jsonString is s as a JSON string (every control character escaped).
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
