package inbox

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/safetext"
)

//go:embed templates/*.html static/*
var assets embed.FS

// securityHeaders are set on every answer. No inline script or style is
// allowed (the one optional script is a file of this origin), nothing may
// frame the page, nothing is cached, and no Referer leaves the origin (an
// approval page's URL names a request). The policy is same-origin, not
// no-referrer: under no-referrer a browser sends "Origin: null" with the
// page's own form posts, which the Origin check (rightly) refuses.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "same-origin",
	"Cache-Control":          "no-store",
	"X-Content-Type-Options": "nosniff",
}

// maxForm is the largest form body read (an edited grant and a reason fit
// many times over).
const maxForm = 64 << 10

type inbox struct {
	b        Backend
	opts     Options
	log      *slog.Logger
	sessions *sessions
	limits   *loginLimiter
	pages    map[string]*template.Template
}

// operator is the authenticated operator of a request.
type operator struct {
	sid  string // the session ID (the cookie's value)
	name string
	csrf string
}

func (in *inbox) routes() http.Handler {
	in.pages = parsePages()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, in.authed(in.pending))
	mux.HandleFunc("GET "+Path+"/{$}", in.authed(in.pending))
	mux.HandleFunc("GET "+Path+"/login", in.loginForm)
	mux.HandleFunc("POST "+Path+"/login", in.login)
	mux.HandleFunc("POST "+Path+"/logout", in.authed(in.logout))
	mux.HandleFunc("GET "+Path+"/approvals/{id}", in.authed(in.approval))
	mux.HandleFunc("POST "+Path+"/approvals/{id}", in.authed(in.decide))
	mux.HandleFunc("GET "+Path+"/audit", in.authed(in.audit))
	mux.HandleFunc("GET "+Path+"/cards", in.authed(in.cards))
	mux.HandleFunc("POST "+Path+"/cards/{id}/revoke", in.authed(in.revoke))
	mux.HandleFunc("GET "+Path+"/static/{name}", in.static)
	mux.HandleFunc(Path+"/", func(w http.ResponseWriter, r *http.Request) {
		in.render(w, http.StatusNotFound, "error", &page{Title: "Not found", Error: "There is no page " + linkText(r.URL.Path) + " in the inbox."})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		mux.ServeHTTP(w, r)
	})
}

// authed wraps a page that needs an operator. It finds the session, checks
// its operator token again with the backend, and for a POST the request's
// provenance and CSRF token. Without a session a page (GET) redirects to
// the login form, which comes back to it; a POST is refused (403).
func (in *inbox) authed(next func(http.ResponseWriter, *http.Request, operator)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		post := r.Method == http.MethodPost
		if post && !in.sameOrigin(w, r) {
			return
		}
		sid := cookieValue(r, sessionCookie)
		s, ok := in.sessions.get(sid, time.Now())
		if ok {
			name, err := in.b.AuthenticateOperator(r.Context(), s.token)
			switch {
			case errors.Is(err, ErrBadToken) || (err == nil && name != s.operator):
				in.log.Warn("inbox: a session's operator token no longer authenticates; session closed", "operator", s.operator, "remote", r.RemoteAddr)
				in.sessions.close(sid)
				ok = false
			case err != nil:
				in.unavailable(w, operator{}, "checking the operator token", err)
				return
			}
		}
		if !ok {
			if post {
				in.log.Warn("inbox: refused a POST without a live session", "path", safetext.Clip(r.URL.Path), "remote", r.RemoteAddr)
				in.render(w, http.StatusForbidden, "error", &page{Title: "Not logged in", Error: "You are not logged in (or your session ended): log in and try again."})
				return
			}
			if sid == "" && crossSiteNavigation(r) {
				// A link from another site (an MCP client's elicitation):
				// the SameSite=Strict cookie was not sent. Load the same
				// URL again from this origin, which sends it; without the
				// query another site wrote (a ?grant= the always form would
				// carry into the operator's session).
				if r.URL.RawQuery != "" {
					http.Redirect(w, r, r.URL.Path, http.StatusSeeOther)
					return
				}
				in.render(w, http.StatusOK, "bounce", &page{Title: "Opening the inbox"})
				return
			}
			http.Redirect(w, r, Path+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		op := operator{sid: sid, name: s.operator, csrf: s.csrf}
		if post {
			if err := r.ParseForm(); err != nil {
				in.render(w, http.StatusBadRequest, "error", &page{Title: "Bad form", Error: "The form could not be read: " + err.Error()})
				return
			}
			if !equalSecret(r.PostForm.Get("csrf"), s.csrf) {
				in.log.Warn("inbox: refused a POST with a missing or wrong CSRF token", "operator", s.operator, "path", safetext.Clip(r.URL.Path), "remote", r.RemoteAddr)
				in.render(w, http.StatusForbidden, "error", &page{Title: "Refused", Error: "The form's CSRF token is missing or wrong: reload the page and try again."})
				return
			}
		}
		next(w, r, op)
	}
}

// sameOrigin refuses (403) a POST that the browser marks as coming from
// another site, and caps its body. The Origin header is checked where the
// inbox is mounted (the same rule as /mcp); Sec-Fetch-Site also catches a
// sibling subdomain (same-site), which SameSite cookies let through.
func (in *inbox) sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		in.log.Warn("inbox: refused a POST from another site", "sec-fetch-site", safetext.Clip(site), "path", safetext.Clip(r.URL.Path), "remote", r.RemoteAddr)
		in.render(w, http.StatusForbidden, "error", &page{Title: "Refused", Error: "This form was posted from another site (Sec-Fetch-Site: " + safetext.Clip(site) + "); the inbox only takes forms from its own pages."})
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	return true
}

// crossSiteNavigation reports whether r is a top-level navigation from
// another site.
func crossSiteNavigation(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	return (site == "cross-site" || site == "same-site") && r.Header.Get("Sec-Fetch-Mode") == "navigate"
}

// loginForm shows the login form, or sends a logged-in operator on.
func (in *inbox) loginForm(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if s, ok := in.sessions.get(cookieValue(r, sessionCookie), time.Now()); ok {
		if _, err := in.b.AuthenticateOperator(r.Context(), s.token); err == nil {
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
	}
	tok := cookieValue(r, loginCookie)
	if len(tok) != len(randomToken()) {
		tok = randomToken()
	}
	setCookie(w, r, loginCookie, tok, 3600)
	in.render(w, http.StatusOK, "login", &page{Title: "Log in", CSRF: tok, Next: next})
}

// login checks an operator token and opens a session.
func (in *inbox) login(w http.ResponseWriter, r *http.Request) {
	if !in.sameOrigin(w, r) {
		return
	}
	if err := r.ParseForm(); err != nil {
		in.render(w, http.StatusBadRequest, "error", &page{Title: "Bad form", Error: "The form could not be read: " + err.Error()})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if !equalSecret(r.PostForm.Get("csrf"), cookieValue(r, loginCookie)) {
		in.log.Warn("inbox: refused a login with a missing or wrong CSRF token", "remote", r.RemoteAddr)
		in.render(w, http.StatusForbidden, "error", &page{Title: "Refused", Error: "The login form's CSRF token is missing or wrong: open the login page again."})
		return
	}
	// Bounded before the token is looked at: a source past its bound
	// learns nothing of the token it sent.
	src := sourceOf(r.RemoteAddr)
	if retry, global := in.limits.take(src); retry > 0 {
		secs := int((retry + time.Second - 1) / time.Second)
		who := "from your address"
		if global {
			who = "from many addresses at once"
		}
		in.log.Warn("inbox: refused a login: too many failed logins", "global", global, "remote", r.RemoteAddr, "retry_after_s", secs)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		in.render(w, http.StatusTooManyRequests, "error", &page{Title: "Too many failed logins", Error: fmt.Sprintf(
			"Too many failed logins %s: try again in %d seconds. Open inbox sessions are not affected, and maiden approve / maiden deny work from the command line meanwhile.", who, secs)})
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	name, err := in.b.AuthenticateOperator(r.Context(), token)
	switch {
	case errors.Is(err, ErrBadToken) || (err == nil && name == "") || token == "":
		in.log.Warn("inbox: refused a login with a token that is not an operator's", "remote", r.RemoteAddr)
		in.render(w, http.StatusForbidden, "login", &page{Title: "Log in", CSRF: cookieValue(r, loginCookie), Next: next,
			Error: "That is not an operator token. Mint one with: maiden operators token NAME (an agent's token does not log in here)."})
		return
	case err != nil:
		in.limits.refund(src, false) // not a failed guess
		in.unavailable(w, operator{}, "checking an operator token", err)
		return
	}
	in.limits.refund(src, true)
	sid := in.sessions.open(name, token, time.Now())
	if sid == "" {
		in.log.Error("inbox: refused a login: the session table is full", "max", in.opts.MaxSessions)
		in.render(w, http.StatusServiceUnavailable, "error", &page{Title: "Unavailable", Error: "Too many open inbox sessions; try again later."})
		return
	}
	in.log.Info("inbox: operator logged in", "operator", name, "remote", r.RemoteAddr)
	setCookie(w, r, sessionCookie, sid, int(in.opts.SessionTTL/time.Second))
	setCookie(w, r, loginCookie, "", -1)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (in *inbox) logout(w http.ResponseWriter, r *http.Request, op operator) {
	in.sessions.close(op.sid)
	setCookie(w, r, sessionCookie, "", -1)
	in.log.Info("inbox: operator logged out", "operator", op.name, "remote", r.RemoteAddr)
	http.Redirect(w, r, Path+"/login", http.StatusSeeOther)
}

// safeNext is where to go after logging in: a path of the inbox, never
// another host (an open redirect), and never with a grant to preview: the
// login form's next is whatever the link to it said, and the redirect
// after the login is a same-origin navigation, which newly would take the
// grant from.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Path) || strings.ContainsAny(next, "\\\r\n\t") || strings.Contains(next, "..") {
		return Path
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || strings.Contains(u.Path, "..") || (u.Path != Path && !strings.HasPrefix(u.Path, Path+"/")) {
		return Path
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Path
	}
	q.Del("grant")
	out := url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: q.Encode()}
	return out.String()
}

func (in *inbox) pending(w http.ResponseWriter, r *http.Request, op operator) {
	list, err := in.b.Pending(r.Context())
	if err != nil {
		in.unavailable(w, op, "listing pending approvals", err)
		return
	}
	p := in.page(op, "pending", "Pending approvals")
	p.Pending, p.Refresh = list, true
	in.render(w, http.StatusOK, "pending", p)
}

func (in *inbox) approval(w http.ResponseWriter, r *http.Request, op operator) {
	a, err := in.b.Approval(r.Context(), r.PathValue("id"))
	if err != nil {
		in.failed(w, op, "loading approval request "+linkText(r.PathValue("id")), err)
		return
	}
	p := in.page(op, "pending", "Approval "+a.ID)
	p.Approval = a
	p.Newly = in.newly(r, a)
	in.render(w, http.StatusOK, "approval", p)
}

// newlyView is what the page shows of what approving a request would
// newly allow: the backend's answer for the grant shown (the request's
// own, or the one the operator asked to preview with ?grant=), or why
// there is none.
type newlyView struct {
	Newly
	Grant string // the always-grant previewed ("" for a boundary request)
	Error string // why it could not be worked out (shown instead)
}

// newly asks the backend, if it can say, what approving pending request a
// would newly allow.
func (in *inbox) newly(r *http.Request, a Approval) *newlyView {
	nb, ok := in.b.(NewlyBackend)
	if !ok || a.State != "pending" || (a.Kind != KindBoundary && !a.AllowAlways) {
		return nil
	}
	v := &newlyView{}
	if a.Kind != KindBoundary {
		// A grant to preview comes from the page's own preview form, never
		// from a link an agent wrote: the always form carries it. Only a
		// same-origin navigation is the form's. A link opened from another
		// application (an MCP client, a terminal, a chat) is a navigation
		// the user started (Sec-Fetch-Site: none), which sends the Strict
		// cookie; a browser without Fetch Metadata sends no Sec-Fetch-Site;
		// neither says where the query came from. (The login form's next
		// never carries a grant: safeNext.)
		if r.Header.Get("Sec-Fetch-Site") == "same-origin" {
			v.Grant = strings.TrimSpace(r.URL.Query().Get("grant"))
		}
		if v.Grant == "" {
			v.Grant = a.AlwaysGrant
		}
	}
	n, err := nb.Newly(r.Context(), a.ID, v.Grant)
	switch {
	case errors.Is(err, ErrRefused):
		v.Error = err.Error()
	case err != nil:
		in.log.Error("inbox: what approving "+a.ID+" would newly allow", "error", err)
		v.Error = "it could not be worked out now (the server's log says why)"
	default:
		v.Newly = n
	}
	return v
}

// decide records the operator's decision (the form's action: approve,
// always or deny) and shows the request as decided.
func (in *inbox) decide(w http.ResponseWriter, r *http.Request, op operator) {
	id := r.PathValue("id")
	d := Answer{By: "operator:" + op.name}
	var done string
	switch r.PostForm.Get("action") {
	case "approve":
		d.Approve, done = true, "Approved once."
	case "always":
		d.Approve, d.Always, d.Grant = true, true, strings.TrimSpace(r.PostForm.Get("grant"))
		done = "Approved, and a card now allows the same call without asking."
	case "deny":
		d.Reason, done = strings.TrimSpace(r.PostForm.Get("reason")), "Denied."
	default:
		in.render(w, http.StatusBadRequest, "error", in.errPage(op, "Bad form", "The form's action must be approve, always or deny."))
		return
	}
	a, err := in.b.Decide(r.Context(), id, d)
	if err != nil {
		in.failed(w, op, "deciding approval request "+id, err)
		return
	}
	in.log.Info("inbox: approval decided", "id", id, "operator", op.name, "approve", d.Approve, "always", d.Always)
	if a.Kind == KindBoundary {
		done = boundaryNotice(a)
	}
	in.sessions.setFlash(op.sid, done)
	http.Redirect(w, r, ApprovalPath(a.ID), http.StatusSeeOther)
}

// boundaryNotice says what deciding boundary request a did: an approval
// may also end in conflict (the boundary cannot take it), which the
// operator must see.
func boundaryNotice(a Approval) string {
	switch a.State {
	case "approved":
		if a.DecisionReason == "already_applied" {
			return "Approved: session " + a.Session + "'s boundary already allowed all of it (revision " + itoa(a.Revision) + "); nothing changed."
		}
		return "Approved: session " + a.Session + "'s boundary is now revision " + itoa(a.Revision) + ", for this session only."
	case "conflict":
		return "Not applied: session " + a.Session + "'s boundary cannot take this request (" + a.DecisionReason + "); the agent is told so."
	case "denied":
		return "Denied; the agent is told the reason."
	}
	return "Decided: " + a.State + "."
}

// auditStatus is the chain's verify status as the audit page shows it.
type auditStatus struct {
	OK   bool
	Text string
}

func (in *inbox) audit(w http.ResponseWriter, r *http.Request, op operator) {
	p := in.page(op, "audit", "Audit trail")
	c, err := in.b.VerifyAudit(r.Context())
	switch {
	case err == nil && c.Whole.IsZero():
		p.Status = auditStatus{OK: true, Text: "ok: " + itoa(c.Records) + " records"}
	case err == nil:
		p.Status = auditStatus{OK: true, Text: "ok: " + itoa(c.Records) + " records (every record checked at " + c.Whole.UTC().Format("15:04:05") +
			" UTC, the " + itoa(c.Read) + " added since then now; maiden audit verify checks every record)"}
	case errors.Is(err, ErrAuditBroken):
		p.Status = auditStatus{Text: err.Error()}
	default:
		in.log.Error("inbox: verifying the audit trail", "error", err)
		p.Status = auditStatus{Text: "could not verify the audit trail now (the server's log says why)"}
	}
	recs, err := in.b.RecentAudit(r.Context(), in.opts.AuditLimit)
	if err != nil {
		in.unavailable(w, op, "reading the audit trail", err)
		return
	}
	p.Audit = recs
	in.render(w, http.StatusOK, "audit", p)
}

// agentCards is one agent's section of the cards page.
type agentCards struct {
	Agent  string
	Cards  []Card
	Hidden int // revoked or expired cards not shown
}

func (in *inbox) cards(w http.ResponseWriter, r *http.Request, op operator) {
	agents, err := in.b.Agents(r.Context())
	if err != nil {
		in.unavailable(w, op, "listing agents", err)
		return
	}
	all := r.URL.Query().Get("all") == "1"
	now := time.Now()
	p := in.page(op, "cards", "Cards")
	p.All = all
	for _, a := range agents {
		list, err := in.b.Cards(r.Context(), a)
		if err != nil {
			in.unavailable(w, op, "listing the cards of agent "+a, err)
			return
		}
		ac := agentCards{Agent: a}
		for _, c := range list {
			if !all && !live(c, now) {
				ac.Hidden++
				continue
			}
			ac.Cards = append(ac.Cards, c)
		}
		p.Agents = append(p.Agents, ac)
	}
	in.render(w, http.StatusOK, "cards", p)
}

func live(c Card, now time.Time) bool {
	return c.Revoked.IsZero() && (c.Expires.IsZero() || now.Before(c.Expires))
}

func (in *inbox) revoke(w http.ResponseWriter, r *http.Request, op operator) {
	id := r.PathValue("id")
	n, err := in.b.RevokeCard(r.Context(), id, "operator:"+op.name)
	if err != nil {
		in.failed(w, op, "revoking card "+id, err)
		return
	}
	in.log.Info("inbox: card revoked", "card", id, "operator", op.name, "revoked", n)
	msg := "Revoked card " + id + "."
	if n > 1 {
		msg = "Revoked card " + id + " and " + itoa(int64(n-1)) + " cards derived from it."
	}
	in.sessions.setFlash(op.sid, msg)
	http.Redirect(w, r, Path+"/cards", http.StatusSeeOther)
}

func (in *inbox) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	data, err := fs.ReadFile(assets, "static/"+name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.Write(data)
}

// linkText is a part of a URL as an error page repeats it: whoever wrote
// the link (an agent's "approve it here") chose it, so it is escaped as
// agent text is and cut, and cannot put a bidi-reordered or page-long
// sentence of its own on the inbox's pages.
func linkText(s string) string {
	v := show(s)
	if v.More > 0 {
		return v.Head + "…"
	}
	return v.Head
}

// failed answers a backend error of an operator's action: the backend's
// words for what the operator can act on, a generic message otherwise.
func (in *inbox) failed(w http.ResponseWriter, op operator, what string, err error) {
	status := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, ErrRefused):
		status = http.StatusBadRequest
	default:
		in.unavailable(w, op, what, err)
		return
	}
	in.render(w, status, "error", in.errPage(op, "Could not do that", what+": "+err.Error()))
}

// unavailable answers 503 for a backend failure whose cause (a file, a
// database error) goes to the log only.
func (in *inbox) unavailable(w http.ResponseWriter, op operator, what string, err error) {
	in.log.Error("inbox: "+what, "error", err)
	p := &page{Title: "Unavailable"}
	if op.name != "" {
		p = in.page(op, "", "Unavailable")
	}
	p.Error = "The inbox could not finish " + what + ": maiden's state is unavailable now (the server's log says why). Try again later."
	in.render(w, http.StatusServiceUnavailable, "error", p)
}

// reqView is what the request template sees: the request and its page
// (for the CSRF token).
type reqView struct {
	P *page
	A Approval
}

// page is what every template sees.
type page struct {
	Title    string
	Nav      string // which navigation entry is current
	Operator string
	CSRF     string
	Notice   string
	Error    string
	Next     string
	Refresh  bool

	Pending  []Approval
	Approval Approval
	Audit    []AuditRecord
	Status   auditStatus
	Agents   []agentCards
	All      bool
	// Newly is what approving the page's request would newly allow (its
	// own page only).
	Newly *newlyView
}

func (in *inbox) page(op operator, nav, title string) *page {
	return &page{Title: title, Nav: nav, Operator: op.name, CSRF: op.csrf, Notice: in.sessions.takeFlash(op.sid)}
}

func (in *inbox) errPage(op operator, title, msg string) *page {
	p := in.page(op, "", title)
	p.Error = msg
	return p
}

// render executes a page into a buffer first, so a template error is a 500
// and never half a page.
func (in *inbox) render(w http.ResponseWriter, status int, name string, p *page) {
	var buf bytes.Buffer
	if err := in.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		in.log.Error("inbox: rendering a page", "page", name, "error", err)
		http.Error(w, "maiden inbox: internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

var pageNames = []string{"pending", "approval", "audit", "cards", "login", "error", "bounce"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"rel":    relative,
		"window": windowWords,
		"short": func(s string) string {
			if len(s) > 12 {
				return s[:12] + "…"
			}
			return s
		},
		"live": func(c Card) bool { return live(c, time.Now()) },
		"req":  func(p *page, a Approval) reqView { return reqView{P: p, A: a} },
		// Agent text: escaped as the CLI escapes it (args.go).
		"safe":            safetext.Escape,
		"show":            show,
		"argRows":         argRows,
		"renderingDigest": renderingDigest,
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(assets,
			"templates/layout.html", "templates/request.html", "templates/"+name+".html"))
	}
	return out
}

// relative says how far t is from now ("in 23h 59m", "4m ago").
func relative(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Until(t)
	ago := d < 0
	if ago {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = itoa(int64(d/time.Second)) + "s"
	case d < time.Hour:
		s = itoa(int64(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		s = itoa(int64(d/time.Hour)) + "h " + itoa(int64(d%time.Hour/time.Minute)) + "m"
	default:
		s = itoa(int64(d/(24*time.Hour))) + " days"
	}
	if ago {
		return s + " ago"
	}
	return "in " + s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// windowWords is a window as "7 days" or "36h0m0s".
func windowWords(d time.Duration) string {
	day := 24 * time.Hour
	switch {
	case d == day:
		return "day"
	case d > day && d%day == 0:
		return itoa(int64(d/day)) + " days"
	}
	return d.String()
}
