package mcpserver

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/maiden-run/maiden/config"
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
	// "Authorization: Bearer <token>".
	AuthToken string
	// SessionIdle is how long a session may go without a request before it
	// is closed and forgotten; 0 means DefaultSessionIdle, negative never.
	// Without it every initialize held its session forever (20,000 of them
	// held 350 MB), and each tool-list change was sent to every one.
	SessionIdle time.Duration
}

// DefaultSessionIdle is how long an idle HTTP session lives by default. A
// client that wants a session kept longer without calls can ping.
const DefaultSessionIdle = 30 * time.Minute

// HTTPHandler returns the streamable HTTP handler, serving Path only.
func (s *Server) HTTPHandler(o HTTPOptions) http.Handler {
	idle := o.SessionIdle
	if idle == 0 {
		idle = DefaultSessionIdle
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{
			Logger:         s.log,
			SessionTimeout: max(idle, 0),
			// The body is read and capped below, by the configuration in
			// force; the SDK's own cap only has to let that through.
			MaxRequestBodyBytes: config.MaxMaxInputBytes + EnvelopeAllowance,
		})
	allowed := map[string]bool{}
	for _, origin := range o.AllowedOrigins {
		allowed[strings.TrimSuffix(strings.ToLower(origin), "/")] = true
	}
	var tokenSum [32]byte
	if o.AuthToken != "" {
		tokenSum = sha256.Sum256([]byte(o.AuthToken))
	}
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !allowed[strings.ToLower(origin)] {
			s.log.Warn("refused request from a foreign origin", "origin", origin, "remote", r.RemoteAddr)
			http.Error(w, "maiden: origin "+origin+" is not allowed (see -allow-origin)", http.StatusForbidden)
			return
		}
		if o.AuthToken != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			// Comparing digests keeps the comparison constant-time whatever
			// the lengths.
			gotSum := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(gotSum[:], tokenSum[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="maiden"`)
				http.Error(w, "maiden: a valid bearer token is required", http.StatusUnauthorized)
				return
			}
		}
		if r.Method != http.MethodPost {
			mcpHandler.ServeHTTP(w, r)
			return
		}
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		w, done, answered := s.trackHTTP(w, r.Header.Get("Mcp-Session-Id"), body)
		if answered {
			return
		}
		defer done()
		mcpHandler.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle(Path, guarded)
	return mux
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
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
