package inbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// The inbox's login, sessions, pages and login limiter, written when
// planted bugs in them left the package's own suite green
// (docs/security-tests.md, "Fourth pass: the inbox and mcpserver's
// authentication"): each test fails with one of those bugs.

// authFake is the fake whose operator check can fail with an error that is
// not ErrBadToken (a state store that cannot answer now), and that answers
// a token it knows under another name, or under none.
type authFake struct {
	*fakeBackend
	amu     sync.Mutex
	authErr error
	names   map[string]string // token → the name answered, "" included
}

func (f *authFake) AuthenticateOperator(ctx context.Context, token string) (string, error) {
	f.amu.Lock()
	err, name, renamed := f.authErr, "", false
	if f.names != nil {
		name, renamed = f.names[token]
	}
	f.amu.Unlock()
	switch {
	case err != nil:
		return "", err
	case renamed:
		return name, nil
	}
	return f.fakeBackend.AuthenticateOperator(ctx, token)
}

func (f *authFake) set(err error, names map[string]string) {
	f.amu.Lock()
	f.authErr, f.names = err, names
	f.amu.Unlock()
}

// TestEveryPageNeedsALogin: every page of the inbox that shows what maiden
// holds (the pending requests at /ui and /ui/, a request's page, the audit
// trail, the cards) answers a request without a session with the redirect
// to the login form that comes back to it, and shows nothing of it.
func TestEveryPageNeedsALogin(t *testing.T) {
	t.Parallel()
	_, c := newInbox(t, newFake(), nil)
	for _, p := range []string{"/ui", "/ui/", "/ui/approvals/ap1", "/ui/audit", "/ui/cards", "/ui/cards?all=1"} {
		resp, body := c.do("GET", p, nil, nil)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/ui/login?next="+url.QueryEscape(p) {
			t.Errorf("GET %s without a session: %d %q, want 303 to /ui/login?next=%s", p, resp.StatusCode, loc, url.QueryEscape(p))
		}
		for _, held := range []string{"Oslo", "ok: 3 records", "tool:invoke weather"} {
			if strings.Contains(body, held) {
				t.Errorf("GET %s without a session shows %q:\n%s", p, held, body)
			}
		}
	}
}

// TestSecurityHeadersAsWritten: the headers every answer carries are the
// ones written here, not only the ones the code's own table holds (which
// TestSecurityHeaders compares against): a page naming an approval
// request sends no Referer elsewhere, is never cached, framed or sniffed,
// and posts its forms only to this origin.
func TestSecurityHeadersAsWritten(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Frame-Options":        "DENY",
		"Referrer-Policy":        "same-origin",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	}
	_, c := newInbox(t, newFake(), nil)
	check := func(p string, resp *http.Response) {
		t.Helper()
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", p, k, got, v)
			}
		}
	}
	for _, p := range []string{"/ui/login", "/ui/approvals/ap1", "/ui/nope"} {
		resp, _ := c.do("GET", p, nil, nil)
		check(p, resp)
	}
	c.login(operatorToken)
	for _, p := range []string{"/ui", "/ui/approvals/ap1", "/ui/audit", "/ui/cards"} {
		resp, _ := c.do("GET", p, nil, nil)
		check(p, resp)
	}
}

// TestFormBodyCapped: a form posted to the inbox is read up to 64 KiB and
// no further: one byte more is refused 400 before its CSRF token or its
// token is looked at, and nothing is decided; a form of exactly the cap is
// read. (Without the cap net/http reads a form body of up to 10 MB into
// memory for anyone who can reach the listener.) The cap is written here,
// not read from maxForm, so that a change of the constant shows.
func TestFormBodyCapped(t *testing.T) {
	t.Parallel()
	const formCap = 64 << 10
	f := newFake()
	srv, c := newInbox(t, f, nil)
	c.login(operatorToken)
	_, page := c.do("GET", "/ui", nil, nil)
	tok := csrf(t, page)
	form := func(size int) url.Values {
		v := url.Values{"csrf": {tok}, "action": {"deny"}, "reason": {""}}
		v.Set("reason", strings.Repeat("a", size-len(v.Encode())))
		if n := len(v.Encode()); n != size {
			t.Fatalf("form of %d bytes, want %d", n, size)
		}
		return v
	}
	resp, body := c.do("POST", "/ui/approvals/ap1", form(formCap+1), nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "The form could not be read") {
		t.Errorf("a decision form of %d bytes: %d, want 400 (the form could not be read)\n%.300s", formCap+1, resp.StatusCode, body)
	}
	if d := f.decisions(); len(d) != 0 {
		t.Fatalf("a form over the cap was decided: %d decisions", len(d))
	}
	if resp, _ := c.do("POST", "/ui/approvals/ap1", form(formCap), nil); resp.StatusCode != http.StatusSeeOther || len(f.decisions()) != 1 {
		t.Errorf("a decision form of exactly %d bytes: %d, %d decisions; want 303 and one", formCap, resp.StatusCode, len(f.decisions()))
	}

	// The login form too, before the CSRF check and the limiter.
	c2 := newClient(t, srv)
	_, lp := c2.do("GET", "/ui/login", nil, nil)
	v := url.Values{"csrf": {csrf(t, lp)}, "token": {operatorToken}, "next": {""}}
	v.Set("next", "/ui/"+strings.Repeat("a", formCap+1-len(v.Encode())-len("/ui/")))
	resp, body = c2.do("POST", "/ui/login", v, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "The form could not be read") || findCookie(resp, sessionCookie) != nil {
		t.Errorf("a login form of %d bytes: %d, want 400 and no session\n%.300s", len(v.Encode()), resp.StatusCode, body)
	}
}

// TestSessionEndsWhenItsTokenNamesAnotherOperator: a session is its
// operator's while its token authenticates as that operator; once the
// backend names another operator for the token, the session is closed
// (a redirect to the login) and does not come back.
func TestSessionEndsWhenItsTokenNamesAnotherOperator(t *testing.T) {
	t.Parallel()
	f := &authFake{fakeBackend: newFake()}
	srv := newTestServer(t, f)
	c := newClient(t, srv)
	if resp, body := c.login(operatorToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d\n%s", resp.StatusCode, body)
	}
	f.set(nil, map[string]string{operatorToken: "mallory"})
	if resp, body := c.do("GET", "/ui", nil, nil); resp.StatusCode != http.StatusSeeOther || strings.Contains(body, "Oslo") {
		t.Fatalf("alice's session once her token names mallory: %d, want a redirect to the login\n%s", resp.StatusCode, body)
	}
	f.set(nil, nil)
	if resp, _ := c.do("GET", "/ui", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the closed session came back: %d", resp.StatusCode)
	}
}

// TestSessionRefusedWhileItsTokenCannotBeChecked: a backend that cannot
// say whether a session's token is still an operator's (its store is
// unavailable) gets the session nothing: pages answer 503, a decision is
// not passed on; the session is not ended for it, and works again once
// the backend answers.
func TestSessionRefusedWhileItsTokenCannotBeChecked(t *testing.T) {
	t.Parallel()
	f := &authFake{fakeBackend: newFake()}
	srv := newTestServer(t, f)
	c := newClient(t, srv)
	c.login(operatorToken)
	_, page := c.do("GET", "/ui", nil, nil)
	tok := csrf(t, page)
	f.set(errors.New("database is locked"), nil)
	for _, p := range []string{"/ui", "/ui/approvals/ap1", "/ui/audit", "/ui/cards"} {
		if resp, body := c.do("GET", p, nil, nil); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "checking the operator token") {
			t.Errorf("GET %s while the token cannot be checked: %d, want 503 (checking the operator token)\n%.400s", p, resp.StatusCode, body)
		}
	}
	if resp, _ := c.do("POST", "/ui/approvals/ap1", url.Values{"csrf": {tok}, "action": {"approve"}}, nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a decision while the token cannot be checked: %d, want 503", resp.StatusCode)
	}
	if d := f.decisions(); len(d) != 0 {
		t.Fatalf("a decision was passed on while the token could not be checked: %+v", d)
	}
	f.set(nil, nil)
	if resp, _ := c.do("GET", "/ui", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the session once the backend answers again: %d, want 200", resp.StatusCode)
	}
}

// TestLoginRefusesAnAnswerNamingNoOperator: a token the backend accepts
// without naming an operator opens no session: it is refused as a token
// that is not an operator's.
func TestLoginRefusesAnAnswerNamingNoOperator(t *testing.T) {
	t.Parallel()
	const nameless = "mop_nameless.0123456789abcdef0123456789abcdef"
	f := &authFake{fakeBackend: newFake()}
	f.set(nil, map[string]string{nameless: ""})
	c := newClient(t, newTestServer(t, f))
	resp, body := c.login(nameless)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not an operator token") || findCookie(resp, sessionCookie) != nil {
		t.Fatalf("login with a token the backend names no operator for: %d, want 403 and no session\n%s", resp.StatusCode, body)
	}
	if resp, _ := c.do("GET", "/ui", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("pending page after the refused login: %d, want a redirect to the login", resp.StatusCode)
	}
}

// TestLoginBackendFailureIsNeitherAGuessNorALogin: a login the backend
// could not check (its store unavailable: 503) is not counted as a failed
// guess, so an operator retrying it is not locked out; nor is it a login,
// so its source does not pass the global bound that a source an operator
// logged in from passes.
func TestLoginBackendFailureIsNeitherAGuessNorALogin(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	f := newFake()
	srv := httptest.NewServer(build(f, &Options{LoginBurst: 2, LoginEvery: time.Minute, GlobalLoginBurst: 3, GlobalLoginEvery: time.Minute}, clock.now))
	t.Cleanup(srv.Close)
	a := clientFrom(t, srv, "127.0.0.2")
	f.mu.Lock()
	f.failAll = errors.New("database is locked")
	f.mu.Unlock()
	for i := range 4 {
		if resp, body := a.login(operatorToken); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("login %d while the backend fails: %d, want 503 (a failure to check is no failed guess)\n%s", i+1, resp.StatusCode, body)
		}
	}
	f.mu.Lock()
	f.failAll = nil
	f.mu.Unlock()
	// Others spend the global bound.
	for _, src := range []string{"127.0.0.3", "127.0.0.3", "127.0.0.4"} {
		if resp, body := clientFrom(t, srv, src).login(agentToken); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a failure from %s: %d\n%s", src, resp.StatusCode, body)
		}
	}
	resp, body := a.login(operatorToken)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "from many addresses") {
		t.Fatalf("a source whose logins only met a failing backend, global bound spent: %d, want 429 (it never logged in)\n%s", resp.StatusCode, body)
	}
}

// TestEqualSecretComparesWholeDigests: two secrets are equal only when
// their whole SHA-256 digests are: a guess whose digest shares its first
// bytes with the secret's is refused.
func TestEqualSecretComparesWholeDigests(t *testing.T) {
	t.Parallel()
	secret := randomToken()
	want := sha256.Sum256([]byte(secret))
	var guess string
	for i := 0; guess == ""; i++ {
		g := fmt.Sprint("guess-", i)
		if d := sha256.Sum256([]byte(g)); d[0] == want[0] && d[1] == want[1] {
			guess = g
		}
	}
	if equalSecret(guess, secret) || equalSecret(secret, guess) {
		t.Fatalf("equalSecret(%q, secret) = true: their digests share only their first two bytes", guess)
	}
	if !equalSecret(secret, strings.Clone(secret)) {
		t.Fatal("equalSecret of a secret and its copy = false")
	}
}

// TestSessionTableSweepsExpiredWhenFull: a full table drops the sessions
// whose time is up, at their expiry instant, to make room for a login;
// until then a login beyond the bound is refused.
func TestSessionTableSweepsExpiredWhenFull(t *testing.T) {
	t.Parallel()
	s := newSessions(time.Minute, 2)
	now := time.Now()
	s.open("a", "t", now)
	s.open("b", "t", now.Add(time.Second))
	if s.open("c", "t", now.Add(59*time.Second)) != "" {
		t.Fatal("a full table of live sessions opened another")
	}
	// a expires at now+1m exactly, b a second later: neither was looked up.
	if s.open("c", "t", now.Add(time.Minute)) == "" {
		t.Fatal("a full table did not drop the session expired at this instant to make room")
	}
	if n := len(s.m); n != 2 {
		t.Fatalf("%d sessions held, want 2 (b and c)", n)
	}
}
