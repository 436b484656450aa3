package inbox_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// shownMax is more than the audit page shows of a record's body.
const shownMax = 8 << 10

// TestStackOriginAndTokens runs the inbox as maiden serve -http mounts it
// (the real Host, store and HTTP handler, no browser): the Origin rule of
// /mcp holds for /ui, an agent's token does not log in, and an operator's
// does.
func TestStackOriginAndTokens(t *testing.T) {
	e := newBrowserEnv(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path, origin string, form url.Values) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, e.url+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	_, page := do("GET", "/ui/login", "", nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no login form:\n%s", page)
	}
	login := func(token, origin string) (*http.Response, string) {
		return do("POST", "/ui/login", origin, url.Values{"csrf": {m[1]}, "token": {token}})
	}

	// A page of another origin (or a DNS-rebinding name) cannot post.
	for _, origin := range []string{"https://evil.example", "http://evil.example:80", "null"} {
		if resp, body := login(e.operator, origin); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "is not allowed") {
			t.Errorf("login from origin %s: %d %q, want 403 from the Origin check", origin, resp.StatusCode, body)
		}
		if resp, _ := do("GET", "/ui/login", origin, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET from origin %s: %d, want 403", origin, resp.StatusCode)
		}
	}
	// The agent's token is a valid token, of an agent: it does not log in.
	if resp, body := login(e.agent, e.url); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not an operator token") {
		t.Fatalf("login with the agent's token: %d\n%s", resp.StatusCode, body)
	}
	// The operator's does, from the server's own (loopback) origin.
	resp, body := login(e.operator, e.url)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login with the operator's token: %d\n%s", resp.StatusCode, body)
	}
	// The audit page: the newest records (found by bisecting the trail's
	// sequence numbers), newest first.
	for i := range 70 {
		e.callNow(t, fmt.Sprint("audited ", i)) // each asks, so each adds records: more than the page shows
	}
	all, err := e.host.AuditTail(context.Background(), 0, 0)
	if err != nil || len(all) <= 100 {
		t.Fatalf("audit trail: %d records, %v", len(all), err)
	}
	resp, body = do("GET", "/ui/audit", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, fmt.Sprintf("ok: %d records", len(all))) {
		t.Fatalf("audit page: %d, want ok: %d records\n%s", resp.StatusCode, len(all), body)
	}
	var seqs []string
	for _, m := range regexp.MustCompile(`<td class="num" title="hash [0-9a-f]+">(\d+)</td>`).FindAllStringSubmatch(body, -1) {
		seqs = append(seqs, m[1])
	}
	var want []string
	for i := len(all) - 1; i >= 0 && len(want) < 100; i-- {
		want = append(want, fmt.Sprint(all[i].Seq))
	}
	if strings.Join(seqs, " ") != strings.Join(want, " ") {
		t.Fatalf("audit page rows %v, want the newest first %v", seqs, want)
	}
	// An agent's large input (its records hold it whole) is shown cut,
	// saying so: not its hundreds of KiB a row, at every view.
	large := strings.Repeat("Z", 200_000)
	e.callNow(t, large)
	if _, body = do("GET", "/ui/audit", "", nil); !strings.Contains(body, "[cut: ") || strings.Contains(body, large[:shownMax]) {
		t.Fatalf("audit page with a record of a %d-byte input: %d bytes, cut %v, want it cut to a few KiB saying so", len(large), len(body), strings.Contains(body, "[cut: "))
	}
	// The Host's errors reach the operator as statuses and words: a request
	// decided twice, an unknown one, an always-grant that names another tool.
	r := e.callNow(t, "decide me")
	if r.Error == nil || r.Error.Kind != "pending" {
		t.Fatalf("call: %+v, want pending", r)
	}
	id := r.Error.Approval
	_, page = do("GET", "/ui/approvals/"+id, "", nil)
	tok := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)[1]
	decide := func(id string, form url.Values) (*http.Response, string) {
		form.Set("csrf", tok)
		return do("POST", "/ui/approvals/"+id, e.url, form)
	}
	if resp, body := decide(id, url.Values{"action": {"always"}, "grant": {"approve:always other --..."}}); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "always-allow refused") {
		t.Errorf("always with another tool's grant: %d, want 400 saying why\n%s", resp.StatusCode, body)
	}
	if resp, _ := decide(id, url.Values{"action": {"deny"}, "reason": {"no"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("deny: %d", resp.StatusCode)
	}
	if resp, body := decide(id, url.Values{"action": {"approve"}}); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already decided") {
		t.Errorf("approving a denied request: %d, want 409\n%s", resp.StatusCode, body)
	}
	if resp, _ := decide("apr_00000000000000000000", url.Values{"action": {"approve"}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown request: %d, want 404", resp.StatusCode)
	}
	if resp, body := do("GET", "/ui/approvals/"+id, "", nil); resp.StatusCode != 200 || !strings.Contains(body, "denied by operator:alice") {
		t.Errorf("the denied request's page: %d\n%s", resp.StatusCode, body)
	}

	// The operator's token is not an agent's: /mcp refuses it.
	req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+e.operator)
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusForbidden {
		t.Fatalf("/mcp with the operator's token: %d, want 403", r2.StatusCode)
	}
}
