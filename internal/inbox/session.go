package inbox

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Cookie names. The session cookie names a server-side session; the login
// cookie carries the login form's CSRF token (double submit), since there
// is no session yet to hold it.
const (
	sessionCookie = "maiden_inbox"
	loginCookie   = "maiden_inbox_login"
)

// session is one operator's login. The token is kept (in memory only) to
// re-check it at every request: an operator token revoked, or an operator
// removed from agent.toml, ends the session at its next request.
type session struct {
	operator string
	token    string
	csrf     string
	expires  time.Time
	flash    string // a message for the next page shown (then cleared)
}

// sessions maps the SHA-256 of a session ID to its session. Keying by the
// hash means the map's lookup time says nothing about the IDs it holds.
type sessions struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	m   map[[32]byte]*session
}

func newSessions(ttl time.Duration, max int) *sessions {
	return &sessions{ttl: ttl, max: max, m: map[[32]byte]*session{}}
}

// randomToken is 32 random bytes, URL-safe base64.
func randomToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// open starts a session for operator and returns its ID, or "" when the
// table is full of live sessions.
func (s *sessions) open(operator, token string, now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		for k, v := range s.m {
			if !now.Before(v.expires) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= s.max {
			return ""
		}
	}
	id := randomToken()
	s.m[sha256.Sum256([]byte(id))] = &session{operator: operator, token: token, csrf: randomToken(), expires: now.Add(s.ttl)}
	return id
}

// get returns a copy of the live session named by id.
func (s *sessions) get(id string, now time.Time) (session, bool) {
	if id == "" {
		return session{}, false
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	if !ok {
		return session{}, false
	}
	if !now.Before(v.expires) {
		delete(s.m, k)
		return session{}, false
	}
	return *v, true
}

// takeFlash returns and clears the session's flash message.
func (s *sessions) takeFlash(id string) string {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok {
		f := v.flash
		v.flash = ""
		return f
	}
	return ""
}

// setFlash sets the message the session's next page shows.
func (s *sessions) setFlash(id, msg string) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok {
		v.flash = msg
	}
}

// close ends a session.
func (s *sessions) close(id string) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
}

// equalSecret compares two secrets in constant time (whatever their
// lengths: both are hashed first). An empty secret never matches.
func equalSecret(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// setCookie sets one of the inbox's cookies: HttpOnly, SameSite=Strict,
// Path=/ui, Secure when the request came over TLS. maxAge < 0 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     Path,
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}

// cookieValue is the value of the request's cookie name, or "".
func cookieValue(r *http.Request, name string) string {
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}
