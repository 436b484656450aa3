package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/inbox"
	"github.com/maiden-run/maiden/internal/safetext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where the streamable HTTP endpoint is served.
const Path = "/mcp"

// HTTPOptions configure the streamable HTTP front end.
type HTTPOptions struct {
	// AllowedOrigins are the exact origins ("https://app.example", with
	// port if not the default) whose browser pages may call the server. A
	// request that carries any other Origin header is refused: the MCP spec
	// requires it of local servers, because otherwise any web page the user
	// opens could drive their tools (DNS rebinding). Requests without an
	// Origin (native clients) are unaffected.
	AllowedOrigins []string
	// AuthToken, if not empty, is required of every request as
	// "Authorization: Bearer <token>" (a static token: maiden is not an
	// OAuth server) while the configuration declares no [agents]; a request
	// without it is answered 403 with a message naming the header (see
	// guard for why not 401). With [agents], each request carries one of
	// the agents' tokens instead and AuthToken is not accepted.
	AuthToken string
	// SessionIdle is how long a session may go without a request before it
	// is closed and forgotten; 0 means DefaultSessionIdle, negative never.
	// Without it every initialize held its session forever (20,000 of them
	// held 350 MB), and each tool-list change was sent to every one.
	SessionIdle time.Duration
	// MaxSessionsPerAgent bounds the HTTP sessions (2025-11-25 era) one
	// agent holds open at once; an initialize beyond it is answered 429
	// until one of the agent's sessions ends (DELETE, or SessionIdle). 0
	// means DefaultMaxSessionsPerAgent, negative no bound. Without it one
	// token could open sessions until the server ran out of memory, each
	// held for SessionIdle.
	MaxSessionsPerAgent int
	// Handlers, if set, are further paths served by the same handler
	// behind the same Origin and token checks as Path (an agent's token
	// with [agents]). A key is a net/http ServeMux pattern; Path,
	// HealthPath and MetricsPath may not be one of them.
	Handlers map[string]http.Handler
	// Health, if set, is served at HealthPath to anyone (a liveness probe
	// carries no credentials), behind the Origin check only. It should
	// say nothing but that the server is up.
	Health http.Handler
	// Metrics, if set, is served at MetricsPath to an operator: a bearer
	// token of an operator or a scraper's metrics token (maiden operators
	// token [-role metrics] NAME), never an agent's, since the metrics
	// name every agent's tools. Without [agents] the static AuthToken is
	// accepted too (the one implicit agent's metrics are its own), and
	// with neither AuthToken nor a token the path is open, as /mcp is.
	Metrics http.Handler
}

// The paths of HTTPOptions.Health and HTTPOptions.Metrics.
const (
	HealthPath  = "/healthz"
	MetricsPath = "/metrics"
)

// DefaultSessionIdle is how long an idle HTTP session lives by default. A
// client that wants a session kept longer without calls can ping.
const DefaultSessionIdle = 30 * time.Minute

// DefaultMaxSessionsPerAgent is HTTPOptions.MaxSessionsPerAgent's default.
const DefaultMaxSessionsPerAgent = 1000

// ModernProtocol is the first MCP revision without sessions (2026-07-28):
// every request carries its protocol version, in the MCP-Protocol-Version
// header and in its _meta, and there is no initialize handshake.
const ModernProtocol = "2026-07-28"

// HTTPHandler returns the streamable HTTP handler, serving Path,
// o.Handlers and the operators' inbox (internal/inbox, under /ui), and
// answering 404 for any other path.
//
// Path serves both eras of MCP (the spec's "dual-era" server). A request
// that names a modern protocol version (MCP-Protocol-Version, or the _meta
// version of a request without that header) is served statelessly, by the
// SDK's stateless handler: a session for that one request, closed when it
// ends, and cancellation when the client closes the response. Anything else
// (initialize, and every request of a 2025-11-25 or older session) goes to
// the SDK's handler with sessions, which expire after SessionIdle.
func (s *Server) HTTPHandler(o HTTPOptions) http.Handler {
	idle := o.SessionIdle
	if idle == 0 {
		idle = DefaultSessionIdle
	}
	if idle > 0 {
		s.handleIdle.Store(int64(idle))
	}
	maxSessions := o.MaxSessionsPerAgent
	if maxSessions == 0 {
		maxSessions = DefaultMaxSessionsPerAgent
	}
	// Each request is served by the SDK server of the agent its token
	// authenticated (guard puts it in the context). The SDK asks for a
	// server when a session starts (initialize) and, statelessly, for every
	// request.
	getServer := func(r *http.Request) *mcp.Server { return s.serverFor(r.Context(), requestAgent(r)).mcp }
	// The body is read and capped below, by the configuration in force; the
	// SDK's own cap only has to let that through.
	bodyCap := int64(config.MaxMaxInputBytes + EnvelopeAllowance)
	sessions := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Logger:              s.log,
		SessionTimeout:      max(idle, 0),
		MaxRequestBodyBytes: bodyCap,
	})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		Logger:              s.log,
		MaxRequestBodyBytes: bodyCap,
		// In the modern era closing the response is the cancellation (there
		// is no notifications/cancelled over HTTP): the running tool is
		// interrupted.
		PropagateRequestCancellation: true,
	})
	mcpHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Where a human opens this request's approvals (approval.go); never
		// what a client says.
		r.Header.Del(inboxHeader)
		if base := s.inboxBaseFor(r); base != "" {
			r.Header.Set(inboxHeader, base)
		}
		// The credential guard authenticated, which a session handle is
		// bound to (session.go); likewise never what a client says.
		r.Header.Del(credentialHeader)
		if c := requestCredential(r); c != "" {
			r.Header.Set(credentialHeader, c)
		}
		if r.Method != http.MethodPost {
			if mixedEra(w, r, nil) {
				return
			}
			if isModern(r.Header.Get("MCP-Protocol-Version"), nil) {
				stateless.ServeHTTP(w, r) // 405: no GET stream, no DELETE
			} else if s.sessionOwned(w, r) {
				if r.Method == http.MethodDelete {
					// The client ends its session: its calls end with it.
					s.calls.cancelSession(r.Header.Get("Mcp-Session-Id"))
				}
				if r.Method == http.MethodGet {
					w, r = s.revocableStream(w, r)
				}
				sessions.ServeHTTP(w, r)
			}
			return
		}
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if mixedEra(w, r, body) {
			return
		}
		if isModern(r.Header.Get("MCP-Protocol-Version"), body) {
			stateless.ServeHTTP(w, r)
			return
		}
		if !s.sessionOwned(w, r) {
			return
		}
		if r.Header.Get("Mcp-Session-Id") == "" {
			// A POST without a session may open one (initialize): within the
			// agent's bound, counting the initializes in flight.
			release, ok := s.reserveSession(requestAgent(r), maxSessions)
			if !ok {
				s.log.Warn("refused a new session: the agent holds as many as it may", "agent", requestAgent(r), "max", maxSessions, "remote", r.RemoteAddr)
				http.Error(w, fmt.Sprintf("maiden: this agent already holds %d open sessions, the most it may; end one (DELETE with its Mcp-Session-Id) or let one expire, then initialize again", maxSessions), http.StatusTooManyRequests)
				return
			}
			defer release()
		}
		w, done, answered := s.trackHTTP(w, r.Header.Get("Mcp-Session-Id"), r.Header.Get("MCP-Protocol-Version"), body)
		if answered {
			return
		}
		defer done()
		sessions.ServeHTTP(w, r)
	})
	guard := s.guard(o)
	mux := http.NewServeMux()
	mux.Handle(Path, guard(mcpHandler))
	// The operators' inbox has its own login (an operator token, then a
	// session cookie): browsers send no bearer token. It is behind the same
	// Origin check as Path.
	ui := s.originCheck(o)(inbox.New(newHostInbox(s.host), &inbox.Options{Logger: s.log}))
	mux.Handle(inbox.Path, ui)
	mux.Handle(inbox.Path+"/", ui)
	if o.Health != nil {
		mux.Handle(HealthPath, s.originCheck(o)(o.Health))
	}
	if o.Metrics != nil {
		mux.Handle(MetricsPath, s.metricsGuard(o)(o.Metrics))
	}
	for pattern, h := range o.Handlers {
		if pattern == Path || pattern == HealthPath || pattern == MetricsPath {
			panic("mcpserver: HTTPOptions.Handlers may not replace " + pattern)
		}
		mux.Handle(pattern, guard(h))
	}
	return mux
}

// isModern reports whether a request belongs to the sessionless era: its
// MCP-Protocol-Version header names 2026-07-28 or later or, without that
// header, its body's _meta names a protocol version (which the stateless
// handler then checks, and answers a missing header with HeaderMismatch).
func isModern(header string, body []byte) bool {
	if header != "" {
		return isDate(header) && header >= ModernProtocol
	}
	// Most such bodies (every initialize, every 2025-03-26 request) name no
	// protocol version: skip parsing them twice. A key spelt with escapes
	// is routed to the session handler, which refuses what it cannot serve.
	if !bytes.Contains(body, []byte("protocolVersion")) {
		return false
	}
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false
	}
	_, ok := msg.Params.Meta["io.modelcontextprotocol/protocolVersion"]
	return ok
}

// mixedEra answers 400 and reports true for a request that names a
// 2025-11-25 session (Mcp-Session-Id) and yet the sessionless protocol (a
// modern MCP-Protocol-Version, or a protocol version in its _meta). The
// era is decided once, here, from the transport; deciding it from the
// header alone would serve such a request statelessly, outside the
// session it names and that session's boundary, and deciding it from the
// session would run it under a protocol it did not ask for. Neither is
// what the client meant, so it is told to drop one.
func mixedEra(w http.ResponseWriter, r *http.Request, body []byte) bool {
	header := r.Header.Get("MCP-Protocol-Version")
	if r.Header.Get("Mcp-Session-Id") == "" || !(isModern(header, body) || isModern("", body)) {
		return false
	}
	http.Error(w, fmt.Sprintf("maiden: a request is of one protocol era: this one carries an Mcp-Session-Id (a %s-era session) and names the sessionless protocol (%s or later, in MCP-Protocol-Version or _meta); a 2026-07-28 client sends no Mcp-Session-Id and names its maiden session in _meta[%q], a session client names no 2026 protocol version", legacyEra, ModernProtocol, MetaSession), http.StatusBadRequest)
	return true
}

// legacyEra is the newest protocol revision with sessions.
const legacyEra = "2025-11-25"

// isDate reports whether v has the form of a protocol revision, YYYY-MM-DD,
// so that comparing it as a string compares dates.
func isDate(v string) bool {
	if len(v) != len("2006-01-02") {
		return false
	}
	_, err := time.Parse("2006-01-02", v)
	return err == nil
}

// guard wraps a handler in the Origin check and the authentication of the
// request's agent, which it puts in the request's context:
//   - a configuration with [agents]: every request must carry one of the
//     agents' tokens (maiden agents token), checked with the state store at
//     every request, so a revoked token is refused at once, in an open
//     session too; the static AuthToken counts for nothing;
//   - without [agents]: the implicit agent, behind AuthToken when set.
//
// The configuration is the one in force at each request (agent.toml may be
// reloaded).
//
// Without a valid token the answer is 403 with a message naming the fix,
// not 401: MCP clients treat a 401 as the start of the OAuth flow of MCP's
// authorization spec (protected-resource metadata, authorization-server
// discovery, client registration, a browser), which a static token cannot
// finish; measured with the MCP Inspector 2.12.0, it ended in "Dynamic Client
// Registration rejected (HTTP 404)". For the same reason nothing is served at
// /.well-known/oauth-protected-resource: that document declares a server an
// OAuth resource server.
func (s *Server) guard(o HTTPOptions) func(http.Handler) http.Handler {
	allowed := allowedOrigins(o)
	var tokenSum [32]byte
	if o.AuthToken != "" {
		tokenSum = sha256.Sum256([]byte(o.AuthToken))
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.foreignOrigin(allowed, w, r) {
				return
			}
			header := r.Header.Get("Authorization")
			got, bearer := strings.CutPrefix(header, "Bearer ")
			agent := maiden.DefaultAgent
			if !s.host.Config().Implicit() {
				if !bearer || got == "" {
					msg := "maiden: this server takes an agent's bearer token, not OAuth: configure the client to send the header \"Authorization: Bearer <token>\" (the MCP client configuration's \"headers\" field), with a token from maiden agents token NAME"
					if header != "" {
						msg = "maiden: the Authorization header is not \"Bearer <token>\" with an agent's token (from maiden agents token NAME); this is not an OAuth server"
					}
					http.Error(w, msg, http.StatusForbidden)
					return
				}
				a, err := s.host.Authenticate(r.Context(), got)
				switch {
				case errors.Is(err, maiden.ErrBadToken):
					s.log.Warn("refused a request with an invalid or revoked agent token", "remote", r.RemoteAddr)
					http.Error(w, "maiden: the token in the header \"Authorization: Bearer <token>\" is not a valid agent token (unknown, or revoked: mint another with maiden agents token NAME); this is not an OAuth server", http.StatusForbidden)
					return
				case err != nil:
					s.log.Error("could not authenticate a request", "error", err)
					// The cause (a file path, a database error) is for the
					// operator's log, not for a client nobody has
					// authenticated yet.
					http.Error(w, "maiden: cannot check the bearer token now: the state store is unavailable (the server's log says why); try again later", http.StatusServiceUnavailable)
					return
				}
				agent = a
				ctx := context.WithValue(r.Context(), credentialKey{}, maiden.TokenCredential(got))
				// A stream this request opens (the 2025-11-25 GET stream)
				// outlives the check above: it asks again at each event
				// (revocableStream).
				ctx = context.WithValue(ctx, recheckKey{}, func(ctx context.Context) error {
					_, err := s.host.Authenticate(ctx, got)
					return err
				})
				r = r.WithContext(ctx)
			} else if o.AuthToken != "" {
				// Comparing digests keeps the comparison constant-time whatever
				// the lengths.
				gotSum := sha256.Sum256([]byte(got))
				if !bearer || subtle.ConstantTimeCompare(gotSum[:], tokenSum[:]) != 1 {
					msg := "maiden: this server takes a static bearer token, not OAuth: configure the client to send the header \"Authorization: Bearer <token>\" (the MCP client configuration's \"headers\" field), with the token from the variable that maiden serve -auth-token-env names"
					if header != "" {
						msg = "maiden: the Authorization header does not carry the bearer token this server takes (\"Authorization: Bearer <token>\", the token from the variable that maiden serve -auth-token-env names); it is not an OAuth server"
					}
					http.Error(w, msg, http.StatusForbidden)
					return
				}
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), agentKey{}, agent)))
		})
	}
}

// metricsGuard wraps /metrics in the Origin check and the authentication
// of an operator: an operator's token or a metrics token (checked with the
// state store at every request, so a revocation holds at once). An agent's
// token is refused with 403, like any other that is not an operator's;
// without [agents] the static AuthToken counts too, and a server with no
// AuthToken and no [agents] leaves the path open (it serves loopback only).
func (s *Server) metricsGuard(o HTTPOptions) func(http.Handler) http.Handler {
	allowed := allowedOrigins(o)
	var tokenSum [32]byte
	if o.AuthToken != "" {
		tokenSum = sha256.Sum256([]byte(o.AuthToken))
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.foreignOrigin(allowed, w, r) {
				return
			}
			got, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if s.host.Config().Implicit() {
				if o.AuthToken == "" {
					next.ServeHTTP(w, r)
					return
				}
				gotSum := sha256.Sum256([]byte(got))
				if bearer && subtle.ConstantTimeCompare(gotSum[:], tokenSum[:]) == 1 {
					next.ServeHTTP(w, r)
					return
				}
			}
			if !bearer || got == "" {
				http.Error(w, "maiden: "+MetricsPath+" takes an operator's bearer token or a metrics token (maiden operators token -role metrics NAME) in the header \"Authorization: Bearer <token>\"; an agent's token is not accepted", http.StatusForbidden)
				return
			}
			_, err := s.host.AuthenticateMetrics(r.Context(), got)
			switch {
			case errors.Is(err, maiden.ErrBadMetricsToken):
				s.log.Warn("refused a metrics request whose token is not an operator's or a metrics token", "remote", r.RemoteAddr)
				http.Error(w, "maiden: "+MetricsPath+" refused the bearer token: it is not a live operator or metrics token (an agent's token never is: mint a scraper's with maiden operators token -role metrics NAME)", http.StatusForbidden)
				return
			case err != nil:
				s.log.Error("could not authenticate a metrics request", "error", err)
				http.Error(w, "maiden: cannot check the bearer token now: the state store is unavailable (the server's log says why); try again later", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// allowedOrigins is the set of o.AllowedOrigins, normalised.
func allowedOrigins(o HTTPOptions) map[string]bool {
	allowed := map[string]bool{}
	for _, origin := range o.AllowedOrigins {
		allowed[strings.TrimSuffix(strings.ToLower(origin), "/")] = true
	}
	return allowed
}

// foreignOrigin answers 403 and reports true for a request whose Origin is
// neither allowed nor the server's own loopback origin, or that reached a
// loopback listener under a name that is not loopback (reboundHost).
func (s *Server) foreignOrigin(allowed map[string]bool, w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin != "" && !allowed[strings.ToLower(origin)] && !ownLoopbackOrigin(origin, r) {
		// Clipped: this is before any token is checked (safetext.Clip).
		s.log.Warn("refused request from a foreign origin", "origin", safetext.Clip(origin), "remote", r.RemoteAddr)
		http.Error(w, "maiden: origin "+safetext.Clip(origin)+" is not allowed (see -allow-origin)", http.StatusForbidden)
		return true
	}
	if reboundHost(r) {
		s.log.Warn("refused a request to a loopback listener under another name (DNS rebinding?)", "host", safetext.Clip(r.Host), "remote", r.RemoteAddr)
		http.Error(w, "maiden: this server listens on loopback and answers only to localhost or a loopback address in the Host header, not "+safetext.Clip(r.Host), http.StatusForbidden)
		return true
	}
	return false
}

// reboundHost reports whether r came to a loopback listener with a Host
// that is not a loopback name: what a DNS-rebinding page's requests look
// like. Its same-origin GETs carry no Origin header, so the Origin check
// alone does not see them. (The SDK's handler makes the same check for
// Path; this makes it for every path, /metrics and the inbox included.)
func reboundHost(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return false
	}
	if !loopbackHost(local.String()) {
		return false
	}
	return !loopbackHost(r.Host)
}

// loopbackHost reports whether hostport (a port is optional) names
// localhost or a loopback address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// originCheck wraps a handler in the Origin check alone (the inbox, which
// authenticates operators itself).
func (s *Server) originCheck(o HTTPOptions) func(http.Handler) http.Handler {
	allowed := allowedOrigins(o)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !s.foreignOrigin(allowed, w, r) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// agentKey is the request-context key of the authenticated agent.
type agentKey struct{}

// credentialKey is the request-context key of the credential guard
// authenticated (maiden.TokenCredential: a token's ID, not its secret).
type credentialKey struct{}

// recheckKey is the request-context key of a function that authenticates
// the request's agent token again (guard sets it; nil without [agents]).
type recheckKey struct{}

// revocableStream wraps the response of a 2025-11-25 session's GET stream,
// which stays open for as long as the client holds it: guard checked its
// token once, when it opened. Each event written to it checks the token
// again (Host.Authenticate: a cached read while the store's cards are
// unchanged), and a token revoked since (or a store that cannot say)
// ends the stream before the event is sent, so a revoked token's open
// stream receives nothing more. The client may open another only with a
// valid token. Without agent tokens, w and r are returned as they are.
func (s *Server) revocableStream(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	recheck, _ := r.Context().Value(recheckKey{}).(func(context.Context) error)
	if recheck == nil {
		return w, r
	}
	// Ended with the request when not by a revocation.
	ctx, cancel := context.WithCancel(r.Context())
	return &streamWriter{ResponseWriter: w, ctx: ctx, cancel: cancel, recheck: recheck, s: s, r: r}, r.WithContext(ctx)
}

// errStreamRevoked is what a write to a revoked token's stream returns.
var errStreamRevoked = errors.New("maiden: the stream's agent token is no longer valid")

// streamWriter is revocableStream's response writer.
type streamWriter struct {
	http.ResponseWriter
	ctx     context.Context
	cancel  context.CancelFunc
	recheck func(context.Context) error
	s       *Server
	r       *http.Request
	ended   atomic.Bool
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if w.ended.Load() {
		return 0, errStreamRevoked
	}
	if err := w.recheck(w.ctx); err != nil {
		if !w.ended.Swap(true) {
			w.s.log.Warn("ended a GET stream whose agent token is no longer valid", "agent", requestAgent(w.r), "credential", requestCredential(w.r), "error", err, "remote", w.r.RemoteAddr)
		}
		w.cancel()
		return 0, errStreamRevoked
	}
	return w.ResponseWriter.Write(p)
}

// Flush and Unwrap let http.ResponseController reach the connection.
func (w *streamWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.ended.Load() {
		f.Flush()
	}
}

func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestCredential is the credential guard authenticated for r: "" for
// none (no [agents]: the static token or none, one credential for all).
func requestCredential(r *http.Request) string {
	c, _ := r.Context().Value(credentialKey{}).(string)
	return c
}

// requestAgent is the agent guard authenticated for r.
func requestAgent(r *http.Request) string {
	if a, ok := r.Context().Value(agentKey{}).(string); ok {
		return a
	}
	return maiden.DefaultAgent
}

// sessionOwned checks that a request naming an HTTP session comes with
// the credential that opened it, and answers it if not:
//   - another agent's valid token does not let its holder into the session
//     (it would reach the first agent's tools);
//   - another token of the same agent (one handed to a less trusted
//     sub-agent) does not either: it would post in the session, open its
//     stream or end it, and run under the boundary a human widened for
//     that session.
//
// Both get the answer of a session that never existed, byte for byte, so
// that a token learns nothing of sessions it cannot use: not that they
// exist, nor that their owner is another agent (a distinct answer was an
// oracle for guessed or leaked IDs). As a 2026-07-28 handle: callSession.
// The operator's log says who was refused on whose session.
//
// A session this server never bound is answered 404, as the SDK answers
// an unknown session, without reaching it.
func (s *Server) sessionOwned(w http.ResponseWriter, r *http.Request) bool {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return true
	}
	owner, ok := s.sessionOwnerOf(id)
	if ok && owner.agent == requestAgent(r) && owner.credential == requestCredential(r) {
		return true
	}
	// The tokens' IDs, never a token: not secrets.
	switch {
	case !ok:
	case owner.agent == requestAgent(r):
		s.log.Warn("refused a request on a session another token of its agent opened", "agent", owner.agent, "credential", requestCredential(r), "remote", r.RemoteAddr)
	default:
		s.log.Warn("refused a request on another agent's session", "agent", requestAgent(r), "credential", requestCredential(r), "owner", owner.agent, "remote", r.RemoteAddr)
	}
	http.Error(w, "maiden: session not found (it expired or never existed; initialize a new one)", http.StatusNotFound)
	return false
}

// ownLoopbackOrigin reports whether origin is the server's own address on
// loopback: a page served by this very listener (the scheme matches the
// connection's, the host and port are the request's Host, and that host is
// localhost or a loopback address). A DNS-rebinding page carries its own,
// non-loopback name in Origin, so it is still refused; the MCP conformance
// suite requires this case to be accepted.
func ownLoopbackOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Path != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host) && loopbackHost(u.Host)
}

// readBody reads a POST body of at most max_input_bytes plus the envelope
// allowance, answering 413 for a larger one without reading it all.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	limit := s.maxMessage()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		s.log.Warn("refused an oversized request body", "limit", limit, "remote", r.RemoteAddr)
		http.Error(w, fmt.Sprintf("maiden: request body over %d bytes (max_input_bytes %d + %d for the envelope); send smaller arguments or raise max_input_bytes in agent.toml",
			limit, limit-EnvelopeAllowance, EnvelopeAllowance), http.StatusRequestEntityTooLarge)
		return nil, false
	case err != nil:
		http.Error(w, "maiden: reading the request body: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return body, true
}

// IsLoopback reports whether a listen address ("host:port") binds only the
// loopback interface. An empty host, 0.0.0.0 or :: bind everything; a name
// other than localhost could resolve anywhere.
func IsLoopback(addr string) bool {
	_, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackHost(addr)
}
