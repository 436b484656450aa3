package egress

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/internal/credential"
)

// Kind "oauth2": the host obtains an access token from the secret's token
// endpoint with the client credentials grant (RFC 6749 section 4.4), keeps
// it per gate, refreshes it before it expires and once when the API
// answers 401, and attaches it as a bearer token. The token request is an
// ordinary request of the tool's policy: its URL passes the same checks
// (http_allow, the secret's destinations with method POST, the caller's
// cards) and it is dialled by the policy's own transport. Concurrent
// requests that need a token share one token request.

// RuleOAuth2Token: the token endpoint did not give an access token. The
// reason says the status and, if it is one RFC 6749 registers, the error
// code; never the endpoint's body.
const RuleOAuth2Token = "oauth2-token"

// maxTokenResponse bounds a token endpoint's answer.
const maxTokenResponse = 64 << 10

// tokenKey names one cached token: the secret, its endpoint and client,
// and the client secret's digest (a rotated secret gets a new token).
type tokenKey struct {
	name, url, client, scopes string
	secret                    [sha256.Size]byte
}

// tokenCache is one token, and the refresh in flight if any.
type tokenCache struct {
	mu      sync.Mutex
	token   string
	expires time.Time
	renew   time.Time // when to refresh it ahead of expiry
	flight  *tokenFlight
	fetched int // token requests made, for tests
}

type tokenFlight struct {
	done  chan struct{}
	token string
	d     Ruling
}

func (g *Gate) tokenCache(k tokenKey) *tokenCache {
	c, _ := g.tokens.LoadOrStore(k, &tokenCache{})
	return c.(*tokenCache)
}

// oauthToken returns a token for secret name of spec: the cached one
// while it is fresh and is not stale (the token a 401 refused), else a
// new one, fetched once however many requests wait for it.
func (g *Gate) oauthToken(ctx context.Context, p *Policy, name string, spec credential.Spec, secret string, authz Authorizer, stale string) (string, Ruling) {
	c := g.tokenCache(tokenKey{name: name, url: spec.TokenURL, client: spec.ClientID, scopes: strings.Join(spec.Scopes, " "), secret: sha256.Sum256([]byte(secret))})
	c.mu.Lock()
	for {
		if c.token != "" && c.token != stale && g.now().Before(c.renew) {
			t := c.token
			c.mu.Unlock()
			return t, allowed
		}
		if c.flight == nil {
			break
		}
		f := c.flight
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return "", deny(RuleOAuth2Token, "credential %s: the call ended while waiting for an access token", quote(name))
		}
		if !f.d.Allow {
			return "", f.d
		}
		c.mu.Lock()
		if c.token == f.token && f.token != stale {
			t := c.token
			c.mu.Unlock()
			return t, allowed
		}
	}
	f := &tokenFlight{done: make(chan struct{})}
	c.flight = f
	c.fetched++
	c.mu.Unlock()

	tok, life, d := g.requestToken(ctx, p, name, spec, secret, authz)
	c.mu.Lock()
	if d.Allow {
		now := g.now()
		c.token, c.expires = tok, now.Add(life)
		// Refresh ahead: a tenth of the lifetime, at most a minute, early.
		c.renew = c.expires.Add(-min(life/10, time.Minute))
	}
	f.token, f.d = tok, d
	c.flight = nil
	close(f.done)
	c.mu.Unlock()
	return tok, d
}

// TokenRequests reports how many token requests the gate has made for
// secret name (all endpoints and clients), for tests and metrics.
func (g *Gate) TokenRequests(name string) int {
	n := 0
	g.tokens.Range(func(k, v any) bool {
		if k.(tokenKey).name == name {
			c := v.(*tokenCache)
			c.mu.Lock()
			n += c.fetched
			c.mu.Unlock()
		}
		return true
	})
	return n
}

func (g *Gate) now() time.Time {
	if g.clock != nil {
		return g.clock()
	}
	return time.Now()
}

// oauthErrorCodes are RFC 6749's registered token error codes: the only
// words of a token endpoint's body a refusal repeats.
var oauthErrorCodes = regexp.MustCompile(`^(invalid_request|invalid_client|invalid_grant|unauthorized_client|unsupported_grant_type|invalid_scope)$`)

// requestToken asks the token endpoint for an access token, after the
// same checks as any request of the policy carrying the secret.
func (g *Gate) requestToken(ctx context.Context, p *Policy, name string, spec credential.Spec, secret string, authz Authorizer) (string, time.Duration, Ruling) {
	t, d := normalizeURL(spec.TokenURL)
	if d.Allow {
		d = p.checkTarget(t)
	}
	if d.Allow {
		d = p.checkDestination(name, t, http.MethodPost)
	}
	if d.Allow && authz != nil {
		d = authorize(authz, t, name)
	}
	if !d.Allow {
		return "", 0, deny(RuleOAuth2Token, "credential %s: its token endpoint is not allowed: %s", quote(name), d.Reason)
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(spec.Scopes) > 0 {
		form.Set("scope", strings.Join(spec.Scopes, " "))
	}
	body := form.Encode()
	req := &http.Request{
		Method: http.MethodPost, URL: t.url(), Host: t.hostPort(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"application/json"}},
		ContentLength: int64(len(body)),
		Body:          io.NopCloser(strings.NewReader(body)),
	}
	// client_secret_basic: both parts form-encoded first (RFC 6749 2.3.1).
	req.SetBasicAuth(url.QueryEscape(spec.ClientID), url.QueryEscape(secret))
	resp, err := p.transport(g).RoundTrip(req.WithContext(ctx))
	if err != nil {
		return "", 0, deny(RuleOAuth2Token, "credential %s: the token endpoint %s could not be reached", quote(name), quote(t.host))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil || len(raw) > maxTokenResponse {
		return "", 0, deny(RuleOAuth2Token, "credential %s: the token endpoint's answer could not be read", quote(name))
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
	}
	jerr := json.Unmarshal(raw, &tr)
	if resp.StatusCode != http.StatusOK || jerr != nil || tr.AccessToken == "" {
		why := fmt.Sprintf("status %d", resp.StatusCode)
		if oauthErrorCodes.MatchString(tr.Error) {
			why += " (error " + tr.Error + ")"
		}
		return "", 0, deny(RuleOAuth2Token, "credential %s: the token endpoint %s gave no access token: %s", quote(name), quote(t.host), why)
	}
	if !strings.EqualFold(tr.TokenType, "bearer") || !credential.HeaderValue(tr.AccessToken) {
		return "", 0, deny(RuleOAuth2Token, "credential %s: the token endpoint %s gave a token maiden cannot send as a bearer token", quote(name), quote(t.host))
	}
	life := time.Duration(tr.ExpiresIn) * time.Second
	if tr.ExpiresIn <= 0 {
		life = 5 * time.Minute // no expiry given: ask again soon rather than never
	}
	return tr.AccessToken, life, allowed
}
