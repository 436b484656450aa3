package callaudit

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/egress"
)

// TunnelBody is the body of the fetch record of one CONNECT a wrapped
// CLI's egress proxy decided (egress.ProxySession's OpenEach): method
// CONNECT, host (HOST:PORT), whether the gate allowed it, its rule, the
// gate's reason for a refusal, and the decisions of the agent's cards
// (what a what-if replays, as for an http-fetch's record; none when the
// gate refused before the cards were asked).
func TunnelBody(t egress.Tunnel, decisions []api.Decision) map[string]any {
	host := t.Host
	if t.Port > 0 {
		// Brackets for an IPv6 literal only: a host the proxy redacted
		// ([REDACTED:NAME].example.net) has a ':' and is not one.
		if a, err := netip.ParseAddr(t.Host); err == nil && a.Is6() {
			host = net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
		} else {
			host = t.Host + ":" + strconv.Itoa(t.Port)
		}
	}
	body := map[string]any{"method": "CONNECT", "host": host, "allowed": t.Allowed, "rule": t.Rule}
	if t.Reason != "" {
		body["reason"] = t.Reason
	}
	if len(decisions) > 0 {
		body["decisions"] = decisions
	}
	return body
}

// RequestBody is the body of the fetch record of one request a host tool
// (web_fetch) sent through the egress gate: the same fields as an
// http-fetch's record (Fetch) — method, credential name, host, path,
// allowed, the status or the error's kind, the decisions of the agent's
// cards — and the names (never values) of the secrets it put in headers.
func RequestBody(r egress.Request, decisions []api.Decision, resp *egress.Response, ferr *egress.FetchError) map[string]any {
	method := r.Method
	if method == "" {
		method = "GET" // as the gate sends it
	}
	out := outcome{}
	switch {
	case ferr != nil:
		out.err, out.denied = string(ferr.Kind), ferr.Kind == egress.FetchDenied
	case resp != nil:
		out.status = resp.Status
	}
	body := fetchBody(method, r.URL, r.Credential, decisions, out)
	if len(r.HeaderSecrets) > 0 {
		body["header_secrets"] = r.HeaderSecrets
	}
	return body
}

// outcome is how a request through the gate ended: its status, or the
// error's kind (denied: refused before anything was sent).
type outcome struct {
	status int
	err    string
	denied bool
}

// fetchBody is the body of the fetch record of one request (Fetch's and
// RequestBody's): method, credential name, host, path without the query,
// the cards' decisions when they were asked, allowed and the status or the
// error's kind.
func fetchBody(method, rawURL, credential string, decisions []api.Decision, out outcome) map[string]any {
	body := map[string]any{"method": method, "credential": credential}
	if len(decisions) > 0 {
		body["decisions"] = decisions
	}
	if u, err := url.Parse(rawURL); err == nil {
		body["host"], body["path"] = u.Host, u.Path
	}
	// The host the gate checked and sent to, not the tool's spelling of
	// it; as written only when the gate refused its syntax (nothing was
	// sent).
	if host, ok := egress.CheckedHost(rawURL); ok {
		body["host"] = host
	}
	switch {
	case out.err != "":
		body["allowed"] = !out.denied
		body["error"] = out.err
	case out.status != 0:
		body["allowed"], body["status"] = true, out.status
	}
	return body
}
