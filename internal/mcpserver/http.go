package mcpserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

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
}

// HTTPHandler returns the streamable HTTP handler, serving Path only.
func (s *Server) HTTPHandler(o HTTPOptions) http.Handler {
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{Logger: s.log})
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
		mcpHandler.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle(Path, guarded)
	return mux
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
