package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	operatorToken = "mop_alice.0123456789abcdef0123456789abcdef"
	agentToken    = "mag_bot.0123456789abcdef0123456789abcdef"
)

// fakeBackend records what the inbox asks of it.
type fakeBackend struct {
	mu        sync.Mutex
	operators map[string]string // token → operator
	approvals map[string]Approval
	decided   []Answer
	decideErr error
	audit     []AuditRecord
	verifyN   int64
	verifyErr error
	// verifyWhole and verifyRead: a check of the records added since the
	// last one (verifyWhole zero: every record checked).
	verifyWhole time.Time
	verifyRead  int64
	cards       map[string][]Card
	revoked     []string // "id by"
	failAll     error
}

func newFake() *fakeBackend {
	now := time.Now()
	return &fakeBackend{
		operators: map[string]string{operatorToken: "alice"},
		approvals: map[string]Approval{
			"ap1": {ID: "ap1", Agent: "bot", Session: "s-1", Tool: "weather", Rendered: "--city=Oslo", Digest: strings.Repeat("ab", 32),
				Rule: "middleware[1] approve", Reason: "city is not Paris", Hosts: []string{"api.example.com"}, Secrets: []string{"WEATHER_KEY"},
				Created: now.Add(-time.Minute), Expires: now.Add(24 * time.Hour), State: "pending", AllowAlways: true,
				AlwaysGrant: "approve:always weather --city=Oslo", ToolDigest: "sha256:" + strings.Repeat("cd", 32), Limits: "timeout 10000 ms, memory 64 MB"},
		},
		audit:   []AuditRecord{{Seq: 3, Kind: "call", Actor: "agent:bot", Agent: "bot", Tool: "weather", Body: `{"n":3}`}, {Seq: 2, Kind: "approval"}, {Seq: 1, Kind: "card-change"}},
		verifyN: 3,
		cards: map[string][]Card{
			"bot": {{ID: "c1", Agent: "bot", Allows: []string{"tool:invoke weather"}, Manager: "operator", Created: now},
				{ID: "c0", Agent: "bot", Allows: []string{"tool:invoke old"}, Manager: "operator", Created: now, Revoked: now}},
		},
	}
}

func (f *fakeBackend) AuthenticateOperator(_ context.Context, token string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAll != nil {
		return "", f.failAll
	}
	if name, ok := f.operators[token]; ok {
		return name, nil
	}
	// The agent's token is a valid token, of an agent: never an operator.
	return "", fmt.Errorf("%w: the token is unknown, revoked, or an agent's", ErrBadToken)
}

func (f *fakeBackend) Pending(context.Context) ([]Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAll != nil {
		return nil, f.failAll
	}
	var out []Approval
	for _, a := range f.approvals {
		if a.State == "pending" {
			out = append(out, a)
		}
	}
	return out, nil
}

func (f *fakeBackend) Approval(_ context.Context, id string) (Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.approvals[id]
	if !ok {
		return Approval{}, fmt.Errorf("%w: no approval request %q", ErrNotFound, id)
	}
	return a, nil
}

func (f *fakeBackend) Decide(_ context.Context, id string, d Answer) (Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decided = append(f.decided, d)
	if f.decideErr != nil {
		return Approval{}, f.decideErr
	}
	a := f.approvals[id]
	a.State, a.DecidedBy, a.Decided, a.DecisionReason = "denied", d.By, time.Now(), d.Reason
	if d.Approve {
		a.State = "approved"
	}
	f.approvals[id] = a
	return a, nil
}

func (f *fakeBackend) RecentAudit(_ context.Context, limit int) ([]AuditRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.audit[:min(limit, len(f.audit))], nil
}

func (f *fakeBackend) VerifyAudit(context.Context) (AuditCheck, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return AuditCheck{Records: f.verifyN, Whole: f.verifyWhole, Read: f.verifyRead}, f.verifyErr
}

func (f *fakeBackend) Agents(context.Context) ([]string, error) { return []string{"bot"}, nil }

func (f *fakeBackend) Cards(_ context.Context, agent string) ([]Card, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cards[agent], nil
}

func (f *fakeBackend) RevokeCard(_ context.Context, id, by string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = append(f.revoked, id+" "+by)
	return 2, nil
}

func (f *fakeBackend) decisions() []Answer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Answer(nil), f.decided...)
}

// client is a browser stand-in: a cookie jar, no redirects followed, and
// the headers a same-origin page's requests carry.
type client struct {
	t    *testing.T
	base string
	c    *http.Client
	site string // Sec-Fetch-Site sent with every request ("" = none)
}

func newClient(t *testing.T, srv *httptest.Server) *client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client{t: t, base: srv.URL, c: c, site: "same-origin"}
}

func (c *client) do(method, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.site != "" {
		req.Header.Set("Sec-Fetch-Site", c.site)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token in a page's forms.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in page:\n%s", page)
	}
	return m[1]
}

// login logs c in with token and returns the status of the login POST.
func (c *client) login(token string) (*http.Response, string) {
	c.t.Helper()
	_, page := c.do("GET", "/ui/login?next=/ui/audit", nil, nil)
	return c.do("POST", "/ui/login", url.Values{"csrf": {csrf(c.t, page)}, "token": {token}, "next": {"/ui/audit"}}, nil)
}

func newInbox(t *testing.T, f *fakeBackend, logs io.Writer) (*httptest.Server, *client) {
	if logs == nil {
		logs = io.Discard
	}
	srv := httptest.NewServer(New(f, &Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}))
	t.Cleanup(srv.Close)
	return srv, newClient(t, srv)
}

func findCookie(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestLoginSetsStrictSessionCookie(t *testing.T) {
	_, c := newInbox(t, newFake(), nil)
	resp, body := c.login(operatorToken)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/audit" {
		t.Fatalf("login: %d %q, want 303 to /ui/audit\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	ck := findCookie(resp, sessionCookie)
	if ck == nil {
		t.Fatal("no session cookie set")
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui" || ck.Secure {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui, not Secure over plain HTTP", ck)
	}
	if n := len(ck.Value); n < 43 {
		t.Errorf("session ID %d characters, want 32 random bytes (43 in base64)", n)
	}
	resp, body = c.do("GET", "/ui", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "alice") || !strings.Contains(body, "--city=Oslo") {
		t.Fatalf("pending page after login: %d\n%s", resp.StatusCode, body)
	}
	// The human sees the code and limits the approval is bound to.
	if !strings.Contains(body, `title="sha256:`+strings.Repeat("cd", 32)+`"`) || !strings.Contains(body, "timeout 10000 ms, memory 64 MB") {
		t.Errorf("pending page lacks the tool's code identity or limits:\n%s", body)
	}
}

func TestSessionCookieSecureOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(New(newFake(), nil))
	defer srv.Close()
	c := newClient(t, srv)
	resp, _ := c.login(operatorToken)
	ck := findCookie(resp, sessionCookie)
	if resp.StatusCode != http.StatusSeeOther || ck == nil || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login over TLS: %d, cookie %+v: want a Secure, HttpOnly, SameSite=Strict cookie", resp.StatusCode, ck)
	}
}

func TestLoginRefused(t *testing.T) {
	for name, token := range map[string]string{
		"agent token":   agentToken,
		"unknown token": "mop_mallory.ffffffffffffffffffffffffffffffff",
		"empty":         "",
	} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			_, c := newInbox(t, newFake(), &logs)
			resp, body := c.login(token)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not an operator token") {
				t.Fatalf("login with %s: %d, want 403 naming the problem\n%s", name, resp.StatusCode, body)
			}
			if findCookie(resp, sessionCookie) != nil {
				t.Fatal("a refused login set a session cookie")
			}
			if resp, _ := c.do("GET", "/ui", nil, nil); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("pending page after a refused login: %d, want a redirect to the login", resp.StatusCode)
			}
			if token != "" && strings.Contains(logs.String(), token) {
				t.Fatalf("the log holds the token:\n%s", logs.String())
			}
		})
	}
}

func TestLoginCSRF(t *testing.T) {
	_, c := newInbox(t, newFake(), nil)
	c.do("GET", "/ui/login", nil, nil) // sets the login cookie
	for name, form := range map[string]url.Values{
		"missing": {"token": {operatorToken}},
		"wrong":   {"token": {operatorToken}, "csrf": {strings.Repeat("A", 43)}},
	} {
		resp, _ := c.do("POST", "/ui/login", form, nil)
		if resp.StatusCode != http.StatusForbidden || findCookie(resp, sessionCookie) != nil {
			t.Errorf("login with %s CSRF token: %d, want 403 and no session", name, resp.StatusCode)
		}
	}
}

// TestLoginCSRFWithoutCookie: a login form posted with no login cookie
// and no csrf field (what a page of another origin, or a script without the
// cookie, can send) is refused as a CSRF failure, even with a valid
// operator token: an empty field must never equal an empty cookie.
func TestLoginCSRFWithoutCookie(t *testing.T) {
	for name, form := range map[string]url.Values{
		"no csrf field":    {"token": {operatorToken}},
		"empty csrf field": {"token": {operatorToken}, "csrf": {""}},
	} {
		t.Run(name, func(t *testing.T) {
			_, c := newInbox(t, newFake(), nil) // never GETs the form: no login cookie
			resp, body := c.do("POST", "/ui/login", form, nil)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "The login form&#39;s CSRF token is missing or wrong") {
				t.Fatalf("cookie-less login post: %d, want 403 refusing the CSRF token\n%s", resp.StatusCode, body)
			}
			if findCookie(resp, sessionCookie) != nil {
				t.Fatal("a cookie-less login post opened a session")
			}
			if resp, _ := c.do("GET", "/ui", nil, nil); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("pending page after the refused login: %d, want a redirect to the login", resp.StatusCode)
			}
		})
	}
}

func TestUnauthenticated(t *testing.T) {
	f := newFake()
	_, c := newInbox(t, f, nil)
	resp, _ := c.do("GET", "/ui/approvals/ap1", nil, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/ui/login?next=%2Fui%2Fapprovals%2Fap1" {
		t.Fatalf("approval page without a session: %d %q, want 303 to the login that comes back", resp.StatusCode, loc)
	}
	// An elicitation's link from another site arrives without the Strict
	// cookie: the page loads itself again from this origin.
	resp, body := c.do("GET", "/ui/approvals/ap1", nil, map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
	if resp.StatusCode != 200 || !strings.Contains(body, `<meta http-equiv="refresh" content="0">`) || strings.Contains(body, "Oslo") {
		t.Fatalf("cross-site navigation without a session: %d, want the reload page and no request details\n%s", resp.StatusCode, body)
	}
	for _, p := range []string{"/ui/approvals/ap1", "/ui/cards/c1/revoke", "/ui/logout"} {
		resp, _ := c.do("POST", p, url.Values{"action": {"approve"}, "csrf": {"x"}}, nil)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s without a session: %d, want 403", p, resp.StatusCode)
		}
	}
	if len(f.decisions()) != 0 || len(f.revoked) != 0 {
		t.Fatal("the backend was asked to act without a session")
	}
	// Other sites cannot be the login's next stop.
	for _, next := range []string{"https://evil.example/", "//evil.example/ui", "/ui/../../x", "/uix", `/ui\@evil`} {
		if got := safeNext(next); got != "/ui" {
			t.Errorf("safeNext(%q) = %q, want /ui", next, got)
		}
	}
	if got := safeNext("/ui/approvals/ap1?x=1"); got != "/ui/approvals/ap1?x=1" {
		t.Errorf("safeNext of an inbox page = %q", got)
	}
}

func TestCSRFAndCrossSitePosts(t *testing.T) {
	f := newFake()
	srv, c := newInbox(t, f, nil)
	c.login(operatorToken)
	_, page := c.do("GET", "/ui", nil, nil)
	tok := csrf(t, page)
	cases := []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no token", url.Values{"action": {"approve"}}, nil},
		{"wrong token", url.Values{"action": {"approve"}, "csrf": {tok[:len(tok)-1] + "x"}}, nil},
		{"another session's token", url.Values{"action": {"approve"}, "csrf": {strings.Repeat("A", len(tok))}}, nil},
		{"cross-site", url.Values{"action": {"approve"}, "csrf": {tok}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"same-site", url.Values{"action": {"approve"}, "csrf": {tok}}, map[string]string{"Sec-Fetch-Site": "same-site"}},
	}
	for _, tc := range cases {
		for _, p := range []string{"/ui/approvals/ap1", "/ui/cards/c1/revoke"} {
			resp, _ := c.do("POST", p, tc.form, tc.hdr)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: POST %s answered %d, want 403", tc.name, p, resp.StatusCode)
			}
		}
	}
	if d := f.decisions(); len(d) != 0 || len(f.revoked) != 0 {
		t.Fatalf("refused posts reached the backend: %v %v", d, f.revoked)
	}
	// The same form with the right token goes through.
	if resp, _ := c.do("POST", "/ui/approvals/ap1", url.Values{"action": {"approve"}, "csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST with the session's token: %d, want 303", resp.StatusCode)
	}
	// A cross-site login is refused too.
	c2 := newClient(t, srv)
	_, lp := c2.do("GET", "/ui/login", nil, nil)
	c2.site = "cross-site"
	if resp, _ := c2.do("POST", "/ui/login", url.Values{"csrf": {csrf(t, lp)}, "token": {operatorToken}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site login: %d, want 403", resp.StatusCode)
	}
}

func TestDecisions(t *testing.T) {
	cases := []struct {
		form url.Values
		want Answer
	}{
		{url.Values{"action": {"approve"}}, Answer{Approve: true, By: "operator:alice"}},
		{url.Values{"action": {"always"}, "grant": {" approve:always weather --city=* "}}, Answer{Approve: true, Always: true, Grant: "approve:always weather --city=*", By: "operator:alice"}},
		{url.Values{"action": {"deny"}, "reason": {"not on a Sunday"}}, Answer{By: "operator:alice", Reason: "not on a Sunday"}},
	}
	for _, tc := range cases {
		t.Run(tc.form.Get("action"), func(t *testing.T) {
			f := newFake()
			_, c := newInbox(t, f, nil)
			c.login(operatorToken)
			_, page := c.do("GET", "/ui", nil, nil)
			tc.form.Set("csrf", csrf(t, page))
			resp, _ := c.do("POST", "/ui/approvals/ap1", tc.form, nil)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/approvals/ap1" {
				t.Fatalf("decide: %d %q, want 303 to the request's page", resp.StatusCode, resp.Header.Get("Location"))
			}
			if got := f.decisions(); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("backend got %+v, want %+v", got, tc.want)
			}
			_, body := c.do("GET", "/ui/approvals/ap1", nil, nil)
			if !strings.Contains(body, `class="notice"`) || !strings.Contains(body, "by operator:alice") || strings.Contains(body, `name="action"`) {
				t.Fatalf("the decided request's page should show the outcome and no buttons:\n%s", body)
			}
		})
	}
	t.Run("bad action", func(t *testing.T) {
		f := newFake()
		_, c := newInbox(t, f, nil)
		c.login(operatorToken)
		_, page := c.do("GET", "/ui", nil, nil)
		resp, _ := c.do("POST", "/ui/approvals/ap1", url.Values{"action": {"maybe"}, "csrf": {csrf(t, page)}}, nil)
		if resp.StatusCode != http.StatusBadRequest || len(f.decisions()) != 0 {
			t.Fatalf("unknown action: %d, %d decisions; want 400 and none", resp.StatusCode, len(f.decisions()))
		}
	})
}

func TestAlwaysOnlyWhenAllowed(t *testing.T) {
	f := newFake()
	a := f.approvals["ap1"]
	a.AllowAlways = false
	f.approvals["ap1"] = a
	_, c := newInbox(t, f, nil)
	c.login(operatorToken)
	_, body := c.do("GET", "/ui", nil, nil)
	if strings.Contains(body, `value="always"`) || !strings.Contains(body, `value="approve"`) {
		t.Fatalf("a rule that forbids always must show no always form:\n%s", body)
	}
}

func TestBackendErrors(t *testing.T) {
	cases := []struct {
		err    error
		status int
		shown  string
	}{
		{fmt.Errorf("%w: request ap1 is denied", ErrConflict), http.StatusConflict, "request ap1 is denied"},
		{fmt.Errorf("%w: the rule may never be auto-approved", ErrRefused), http.StatusBadRequest, "may never be auto-approved"},
		{fmt.Errorf("%w: ap1", ErrNotFound), http.StatusNotFound, "ap1"},
		{errors.New("open /secret/path/state.db: disk I/O error"), http.StatusServiceUnavailable, "unavailable"},
	}
	for _, tc := range cases {
		f := newFake()
		f.decideErr = tc.err
		var logs bytes.Buffer
		_, c := newInbox(t, f, &logs)
		c.login(operatorToken)
		_, page := c.do("GET", "/ui", nil, nil)
		resp, body := c.do("POST", "/ui/approvals/ap1", url.Values{"action": {"always"}, "csrf": {csrf(t, page)}}, nil)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.shown) {
			t.Errorf("backend error %v: %d, want %d showing %q\n%s", tc.err, resp.StatusCode, tc.status, tc.shown, body)
		}
		if strings.Contains(body, "/secret/path") {
			t.Errorf("an internal error's cause reached the page:\n%s", body)
		}
	}
}

func TestEscaping(t *testing.T) {
	f := newFake()
	a := f.approvals["ap1"]
	a.Rendered = `--note=<script>alert(1)</script> --q="><img src=x onerror=alert(2)>`
	a.Reason = `<b>bold</b>`
	a.AlwaysGrant = `approve:always weather --note="<script>alert(3)</script>"`
	f.approvals["ap1"] = a
	f.audit[0].Body = `{"x":"<script>alert(4)</script>"}`
	_, c := newInbox(t, f, nil)
	c.login(operatorToken)
	for _, p := range []string{"/ui", "/ui/approvals/ap1", "/ui/audit"} {
		_, body := c.do("GET", p, nil, nil)
		for _, bad := range []string{"<script>alert", "<img src=x", "<b>bold", `"><img`} {
			if strings.Contains(body, bad) {
				t.Errorf("%s renders %q unescaped:\n%s", p, bad, body)
			}
		}
		if p != "/ui/audit" && !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the argument escaped:\n%s", p, body)
		}
	}
}

var hiddenGrant = regexp.MustCompile(`<input type="hidden" name="grant" value="[^"]*">`)

// TestAgentTextEscapedOnEveryPage: control, bidi and zero-width
// characters an agent put in a call reach no page raw: not the always
// grant (a text input would show an override reversed and drop line
// breaks, so such a grant is shown escaped and sent unchanged in a hidden
// field), nor the audit trail's records, nor the cards' grants.
func TestAgentTextEscapedOnEveryPage(t *testing.T) {
	f := newFake()
	a := f.approvals["ap1"]
	a.Rendered = `"--to=x\u202e` + "\n" + `y"`
	a.AlwaysGrant = "approve:always weather \"--to=x\u202e\ny\""
	f.approvals["ap1"] = a
	f.audit[0].Body = `{"to":"x` + "\u202e\u200b" + `"}`
	f.audit[0].Actor = "agent:b\u202eot"
	f.cards["bot"][0].Allows = []string{"tool:invoke pay --to=\u202emallory"}
	_, c := newInbox(t, f, nil)
	c.login(operatorToken)
	for _, p := range []string{"/ui", "/ui/approvals/ap1", "/ui/audit", "/ui/cards"} {
		_, body := c.do("GET", p, nil, nil)
		body = hiddenGrant.ReplaceAllString(body, "") // not shown: sent back as it is
		if i := strings.IndexAny(body, "\u202e\u200b"); i >= 0 {
			t.Errorf("%s holds a raw bidi or zero-width character: %q", p, body[max(i-60, 0):min(i+20, len(body))])
		}
	}
	_, body := c.do("GET", "/ui/approvals/ap1", nil, nil)
	if !strings.Contains(body, `<input type="hidden" name="grant" value="approve:always weather &#34;--to=x`+"\u202e\ny"+`&#34;">`) ||
		!strings.Contains(body, `<code class="always-grant">approve:always weather &#34;--to=x\u202e\ny&#34;</code>`) || strings.Contains(body, `type="text" name="grant"`) {
		t.Errorf("the always grant with control characters is not shown escaped and sent unchanged:\n%s", body)
	}
	_, body = c.do("GET", "/ui/cards", nil, nil)
	if !strings.Contains(body, `tool:invoke pay --to=\u202emallory`) {
		t.Errorf("the cards page does not show the grant escaped:\n%s", body)
	}
}

func TestSecurityHeaders(t *testing.T) {
	_, c := newInbox(t, newFake(), nil)
	paths := []string{"/ui/login", "/ui/static/style.css", "/ui/nope", "/ui"}
	check := func(p string, resp *http.Response) {
		for k, v := range securityHeaders {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", p, k, got, v)
			}
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", p, csp)
		}
	}
	for _, p := range paths {
		resp, _ := c.do("GET", p, nil, nil)
		check(p, resp)
	}
	c.login(operatorToken)
	for _, p := range []string{"/ui", "/ui/audit", "/ui/cards", "/ui/approvals/ap1", "/ui/approvals/nope"} {
		resp, _ := c.do("GET", p, nil, nil)
		check(p, resp)
	}
	if resp, body := c.do("GET", "/ui/static/refresh.js", nil, nil); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || !strings.Contains(body, "reload") {
		t.Errorf("refresh.js: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := c.do("GET", "/ui/approvals/nope", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown request: %d, want 404", resp.StatusCode)
	}
}

func TestRevokedOperatorTokenEndsSession(t *testing.T) {
	f := newFake()
	_, c := newInbox(t, f, nil)
	c.login(operatorToken)
	if resp, _ := c.do("GET", "/ui", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("after login: %d", resp.StatusCode)
	}
	f.mu.Lock()
	delete(f.operators, operatorToken)
	f.mu.Unlock()
	if resp, _ := c.do("GET", "/ui", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after the operator token was revoked: %d, want a redirect to the login", resp.StatusCode)
	}
	f.mu.Lock()
	f.operators[operatorToken] = "alice"
	f.mu.Unlock()
	if resp, _ := c.do("GET", "/ui", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the closed session came back: %d", resp.StatusCode)
	}
}

func TestLogout(t *testing.T) {
	_, c := newInbox(t, newFake(), nil)
	c.login(operatorToken)
	_, page := c.do("GET", "/ui", nil, nil)
	u, _ := url.Parse(c.base + "/ui")
	sid := c.c.Jar.Cookies(u)[0].Value
	resp, _ := c.do("POST", "/ui/logout", url.Values{"csrf": {csrf(t, page)}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	// The old cookie, replayed, names no session.
	resp, _ = c.do("GET", "/ui", nil, map[string]string{"Cookie": sessionCookie + "=" + sid})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the logged-out session still works: %d", resp.StatusCode)
	}
}

func TestAuditPage(t *testing.T) {
	f := newFake()
	_, c := newInbox(t, f, nil)
	c.login(operatorToken)
	_, body := c.do("GET", "/ui/audit", nil, nil)
	if !strings.Contains(body, "ok: 3 records") || strings.Index(body, ">3<") > strings.Index(body, ">1<") {
		t.Fatalf("audit page: want the verify status and the newest first:\n%s", body)
	}
	// A view that read only the records added since the last: it says so.
	f.mu.Lock()
	f.verifyWhole, f.verifyRead = time.Date(2026, 12, 6, 11, 58, 7, 0, time.UTC), 2
	f.mu.Unlock()
	_, body = c.do("GET", "/ui/audit", nil, nil)
	if want := "ok: 3 records (every record checked at 11:58:07 UTC, the 2 added since then now; maiden audit verify checks every record)"; !strings.Contains(body, want) {
		t.Fatalf("audit page after a check of the added records: want %q:\n%s", want, body)
	}
	f.mu.Lock()
	f.verifyErr = fmt.Errorf("%w: record 2 edited: hash mismatch", ErrAuditBroken)
	f.mu.Unlock()
	_, body = c.do("GET", "/ui/audit", nil, nil)
	if !strings.Contains(body, "record 2 edited") || !strings.Contains(body, `verify bad`) {
		t.Fatalf("audit page of a broken chain: want the first bad record named:\n%s", body)
	}
}

func TestCardsPageAndRevoke(t *testing.T) {
	f := newFake()
	_, c := newInbox(t, f, nil)
	c.login(operatorToken)
	_, body := c.do("GET", "/ui/cards", nil, nil)
	if !strings.Contains(body, "tool:invoke weather") || strings.Contains(body, "tool:invoke old") || !strings.Contains(body, "1 revoked or expired") {
		t.Fatalf("cards page: want the live card only:\n%s", body)
	}
	if _, all := c.do("GET", "/ui/cards?all=1", nil, nil); !strings.Contains(all, "tool:invoke old") {
		t.Fatal("cards page ?all=1 does not show the revoked card")
	}
	resp, _ := c.do("POST", "/ui/cards/c1/revoke", url.Values{"csrf": {csrf(t, body)}}, nil)
	if resp.StatusCode != http.StatusSeeOther || len(f.revoked) != 1 || f.revoked[0] != "c1 operator:alice" {
		t.Fatalf("revoke: %d, backend got %v", resp.StatusCode, f.revoked)
	}
	if _, body := c.do("GET", "/ui/cards", nil, nil); !strings.Contains(body, "Revoked card c1 and 1 cards derived from it.") {
		t.Fatalf("no notice after revoking:\n%s", body)
	}
}

func TestUnavailableBackend(t *testing.T) {
	f := newFake()
	_, c := newInbox(t, f, nil)
	c.login(operatorToken)
	f.mu.Lock()
	f.failAll = errors.New("database is locked at /var/lib/maiden/state.db")
	f.mu.Unlock()
	resp, body := c.do("GET", "/ui", nil, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(body, "/var/lib") {
		t.Fatalf("store failure: %d, want 503 without the cause\n%s", resp.StatusCode, body)
	}
}

func TestSessionsNeverLogged(t *testing.T) {
	var logs bytes.Buffer
	_, c := newInbox(t, newFake(), &logs)
	resp, _ := c.login(operatorToken)
	sid := findCookie(resp, sessionCookie).Value
	_, page := c.do("GET", "/ui", nil, nil)
	c.do("POST", "/ui/approvals/ap1", url.Values{"action": {"approve"}}, nil) // refused: no CSRF
	c.do("POST", "/ui/logout", url.Values{"csrf": {csrf(t, page)}}, nil)
	out := logs.String()
	if !strings.Contains(out, "logged in") {
		t.Fatalf("the login was not logged:\n%s", out)
	}
	for _, secret := range []string{operatorToken, sid, csrf(t, page)} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log holds a secret (%.6s…):\n%s", secret, out)
		}
	}
}

func TestSessionTable(t *testing.T) {
	s := newSessions(time.Minute, 2)
	now := time.Now()
	a, b := s.open("a", "t", now), s.open("b", "t", now)
	if a == "" || b == "" || a == b {
		t.Fatal("sessions not opened")
	}
	if s.open("c", "t", now) != "" {
		t.Fatal("a full table opened another session")
	}
	if _, ok := s.get(a, now.Add(time.Minute)); ok {
		t.Fatal("an expired session is still live")
	}
	if s.open("c", "t", now.Add(time.Minute)) == "" {
		t.Fatal("expired sessions were not dropped to make room")
	}
	if _, ok := s.get("", now); ok {
		t.Fatal("the empty ID names a session")
	}
}

// FuzzSafeNext: whatever the login's next parameter says, the redirect
// stays on this server and inside the inbox.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/ui", "/ui/approvals/x", "//evil.example", "https://evil.example/ui", `/ui\evil`, "/ui/../x", "/ui%2f..%2f", "/ui/?next=//x", "/ui/%2E%2E/mcp", "/ui/approvals/x?grant=approve%3Aalways+x&grant=y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.HasPrefix(got, "//") ||
			(u.Path != "/ui" && !strings.HasPrefix(u.Path, "/ui/")) || strings.ContainsAny(got, "\\\r\n\t") || strings.Contains(u.Path, "..") {
			t.Fatalf("safeNext(%q) = %q leaves the inbox", next, got)
		}
		if u.Query().Has("grant") {
			t.Fatalf("safeNext(%q) = %q carries a grant to preview", next, got)
		}
	})
}

// TestSessionsHammer: logins, lookups, flashes and logouts from many
// goroutines at once (run with -race).
func TestSessionsHammer(t *testing.T) {
	s := newSessions(time.Minute, 64)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				id := s.open(fmt.Sprint("op", g), "tok", time.Now())
				if id == "" {
					continue // full: others hold the table
				}
				if v, ok := s.get(id, time.Now()); !ok || v.operator != fmt.Sprint("op", g) {
					t.Errorf("session of op%d: %+v %v", g, v, ok)
					return
				}
				s.setFlash(id, fmt.Sprint(i))
				if f := s.takeFlash(id); f != fmt.Sprint(i) {
					t.Errorf("flash %q, want %d", f, i)
					return
				}
				s.close(id)
				if _, ok := s.get(id, time.Now()); ok {
					t.Error("a closed session is still live")
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestREADMENamesEveryFormField (issue 27, rough edge 8): every form field
// the inbox's handlers read is named in README's "Scripting a decision
// through the inbox", so that an operator can script a decision.
func TestREADMENamesEveryFormField(t *testing.T) {
	src, err := os.ReadFile("handlers.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "**Scripting a decision through the inbox**")
	if !ok {
		t.Fatal("README has no section on scripting a decision through the inbox")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	fields := regexp.MustCompile(`PostForm\.Get\("([a-z_]+)"\)`).FindAllStringSubmatch(string(src), -1)
	if len(fields) < 5 {
		t.Fatalf("found only %d form fields in handlers.go: the pattern is stale", len(fields))
	}
	for _, f := range fields {
		if !strings.Contains(section, "`"+f[1]+"`") {
			t.Errorf("form field %q is not documented in README's scripting section", f[1])
		}
	}
	for _, c := range []string{sessionCookie, loginCookie} {
		if !strings.Contains(section, "`"+c+"`") {
			t.Errorf("cookie %q is not documented in README's scripting section", c)
		}
	}
}
