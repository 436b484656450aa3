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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/internal/credential"
)

// Kind "oauth2": the host obtains an access token from the secret's token
// endpoint with the client credentials grant (RFC 6749 section 4.4) or a
// refresh token (section 6), keeps it per gate, refreshes it before it
// expires and once when the API answers 401, and attaches it as a bearer
// token. The token request is an ordinary request of the tool's policy:
// its URL passes the same checks (http_allow, the secret's destinations
// with method POST, the caller's cards) and it is dialled by the policy's
// own transport. Concurrent requests that need a token share one token
// request; with Options.Tokens, so do the instances sharing its store
// (tokenshare.go).
//
// A refresh token is sent to the token endpoint only. When the endpoint
// rotates it (answers with a new refresh_token), the new one is kept (in
// memory, and sealed in the shared store) and used next: the configured
// value stays the root the host starts from.

// RuleOAuth2Token: the token endpoint did not give an access token. The
// reason says the status and, if it is one RFC 6749 registers, the error
// code; never the endpoint's body.
const RuleOAuth2Token = "oauth2-token"

// maxTokenResponse bounds a token endpoint's answer.
const maxTokenResponse = 64 << 10

// maxTokenLife bounds how long an access token is used before the host
// asks for a new one, whatever expires_in the endpoint gave: the endpoint
// is not trusted to say "for ever" (a lifetime in seconds that does not fit
// a time.Duration would otherwise wrap around, to a token asked for on
// every call), and a token the issuer can no longer revoke by expiry
// should not outlive a day. Asking once a day costs nothing.
const maxTokenLife = 24 * time.Hour

// tokenKey names one cached token: the secret, its endpoint, client,
// scopes and grant, and the digest of its values (the client secret or
// refresh token, and a client secret part): a rotated secret, or a changed
// [secrets.NAME] table, is another key, and the first call under it
// evicts the old one (tokenCache).
type tokenKey struct {
	name, url, client, scopes, grant string
	secret                           [sha256.Size]byte
}

func newTokenKey(name string, spec credential.Spec, v credential.Values) tokenKey {
	return tokenKey{name: name, url: spec.TokenURL, client: spec.ClientID, scopes: strings.Join(spec.Scopes, " "),
		grant: spec.Grant, secret: sha256.Sum256([]byte(v.Value + "\x00" + v.ClientSecret))}
}

// tokenEntry is one access token and, for the refresh grant, the refresh
// token to use next ("" until the endpoint rotates the configured one).
type tokenEntry struct {
	Token   string    `json:"t"`
	Expires time.Time `json:"e"`
	Renew   time.Time `json:"n"` // when to refresh it ahead of expiry
	Refresh string    `json:"r,omitempty"`
	Scopes  string    `json:"s,omitempty"` // what Token was asked for
	// unsaved: the shared token store failed to keep this entry after the
	// endpoint gave it (tokenshare.go), so its Refresh is newer than the
	// store's row, which holds a refresh token the endpoint has spent.
	// Never stored (a row that holds the entry is saved).
	unsaved bool
}

// fresh reports whether e may be attached at now for scopes, stale being
// the token an API refused.
func (e tokenEntry) fresh(now time.Time, scopes, stale string) bool {
	return e.Token != "" && e.Token != stale && e.Scopes == scopes && now.Before(e.Renew)
}

// tokenCache is one token, and the token request in flight if any.
type tokenCache struct {
	mu     sync.Mutex
	entry  tokenEntry
	flight *tokenFlight
}

type tokenFlight struct {
	done  chan struct{}
	token string
	d     Ruling
}

// tokenCache is k's cache. Creating it evicts every other cache of k's
// secret name: the secret was rotated or its table changed, and the old
// access token (and rotated refresh token) must never be sent again.
func (g *Gate) tokenCache(k tokenKey) *tokenCache {
	if c, ok := g.tokens.Load(k); ok {
		return c.(*tokenCache)
	}
	// Only the table changed (scopes, say), not the refresh token: the
	// rotation the endpoint made is the one valid refresh token of this
	// lineage (the configured one is spent), so the new cache starts
	// from it.
	fresh := &tokenCache{}
	g.tokens.Range(func(o, oc any) bool {
		if o := o.(tokenKey); o.name == k.name && o.secret == k.secret && o.url == k.url && o.client == k.client {
			oc := oc.(*tokenCache)
			oc.mu.Lock()
			fresh.entry.Refresh, fresh.entry.unsaved = oc.entry.Refresh, oc.entry.unsaved
			oc.mu.Unlock()
		}
		return true
	})
	c, loaded := g.tokens.LoadOrStore(k, fresh)
	if !loaded {
		g.tokens.Range(func(o, oc any) bool {
			if o := o.(tokenKey); o.name == k.name && o != k {
				g.tokens.Delete(o)
				oc := oc.(*tokenCache)
				oc.mu.Lock()
				old := oc.entry
				oc.mu.Unlock()
				g.retire(k.name, old.Token, old.Expires)
			}
			return true
		})
	}
	return c.(*tokenCache)
}

// oauthToken returns a token for secret name of spec: the cached one
// while it is fresh and is not stale (the token a 401 refused), else a
// new one, fetched once however many requests wait for it.
func (g *Gate) oauthToken(ctx context.Context, p *Policy, name string, spec credential.Spec, v credential.Values, authz Authorizer, stale string) (string, Ruling) {
	k := newTokenKey(name, spec, v)
	c := g.tokenCache(k)
	c.mu.Lock()
	for {
		if c.entry.fresh(g.now(), k.scopes, stale) {
			t := c.entry.Token
			c.mu.Unlock()
			return t, allowed
		}
		if c.flight == nil {
			break
		}
		f := c.flight
		c.mu.Unlock()
		if g.waitingForToken != nil {
			g.waitingForToken(name)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return "", deny(RuleOAuth2Token, "credential %s: the call ended while waiting for an access token", quote(name))
		}
		if !f.d.Allow {
			return "", f.d
		}
		c.mu.Lock()
		if c.entry.Token == f.token && f.token != stale {
			t := c.entry.Token
			c.mu.Unlock()
			return t, allowed
		}
	}
	f := &tokenFlight{done: make(chan struct{})}
	c.flight = f
	prev := c.entry
	c.mu.Unlock()

	e, d := g.newToken(ctx, p, name, k, spec, v, prev, authz, stale)
	c.mu.Lock()
	if d.Allow {
		if old := c.entry; old.Token != e.Token && old.Token != stale {
			// Refreshed ahead of its expiry: still valid until then.
			// (The one an API refused is not kept.)
			g.retire(name, old.Token, old.Expires)
		}
		c.entry = e
	}
	f.token, f.d = e.Token, d
	c.flight = nil
	close(f.done)
	c.mu.Unlock()
	return e.Token, d
}

// newToken is a token for k that is not stale: through the shared store
// when the gate has one (which may hold a fresh token another instance
// obtained), else from the endpoint. prev is the entry k's cache holds:
// its Refresh is the refresh token the endpoint last rotated to ("" for
// the configured one).
func (g *Gate) newToken(ctx context.Context, p *Policy, name string, k tokenKey, spec credential.Spec, v credential.Values, prev tokenEntry, authz Authorizer, stale string) (tokenEntry, Ruling) {
	if g.share != nil {
		if e, d, shared := g.sharedToken(ctx, p, name, k, spec, v, prev, authz, stale); shared {
			return e, d
		}
	}
	return g.requestToken(ctx, p, name, spec, v, prev.Refresh, authz)
}

// retiredToken is an access token of secret name the gate no longer
// attaches, which its issuer accepts until expires.
type retiredToken struct {
	name, token string
	expires     time.Time
}

// maxRetired bounds the retired tokens a gate keeps. A token is retired
// when it is refreshed ahead of its expiry (at most a minute before) or
// its secret or table changes, so a few are kept at a time; past the
// bound the one that expires first goes.
const maxRetired = 256

// retire keeps token, of secret name, for redaction until it expires.
func (g *Gate) retire(name, token string, expires time.Time) {
	now := g.now()
	if token == "" || !now.Before(expires) {
		return
	}
	g.retiredMu.Lock()
	defer g.retiredMu.Unlock()
	g.retired = slices.DeleteFunc(g.retired, func(r retiredToken) bool { return !now.Before(r.expires) || r.token == token })
	if len(g.retired) >= maxRetired {
		first := 0
		for i, r := range g.retired {
			if r.expires.Before(g.retired[first].expires) {
				first = i
			}
		}
		g.retired = slices.Delete(g.retired, first, first+1)
	}
	g.retired = append(g.retired, retiredToken{name: name, token: token, expires: expires})
}

// retiredTokens are the retired tokens of secret name that have not
// expired; the expired ones are dropped.
func (g *Gate) retiredTokens(name string) []string {
	now := g.now()
	g.retiredMu.Lock()
	defer g.retiredMu.Unlock()
	g.retired = slices.DeleteFunc(g.retired, func(r retiredToken) bool { return !now.Before(r.expires) })
	var out []string
	for _, r := range g.retired {
		if r.name == name {
			out = append(out, r.token)
		}
	}
	return out
}

// TokenRequests reports how many token requests the gate has made for
// secret name (all endpoints and clients), for tests and metrics.
func (g *Gate) TokenRequests(name string) int {
	if n, ok := g.fetched.Load(name); ok {
		return int(n.(*atomic.Int64).Load())
	}
	return 0
}

func (g *Gate) countTokenRequest(name string) {
	n, _ := g.fetched.LoadOrStore(name, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
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
// same checks as any request of the policy carrying the secret. refresh,
// for the refresh grant, is the refresh token to send ("" for the
// configured one, v.Value).
func (g *Gate) requestToken(ctx context.Context, p *Policy, name string, spec credential.Spec, v credential.Values, refresh string, authz Authorizer) (tokenEntry, Ruling) {
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
		return tokenEntry{}, deny(RuleOAuth2Token, "credential %s: its token endpoint is not allowed: %s", quote(name), d.Reason)
	}
	g.countTokenRequest(name)
	form := url.Values{"grant_type": {credential.GrantClientCredentials}}
	user, pass := spec.ClientID, v.Value
	if spec.RefreshGrant() {
		if refresh == "" {
			refresh = v.Value
		}
		form = url.Values{"grant_type": {credential.GrantRefreshToken}, "refresh_token": {refresh}}
		user, pass = spec.ClientID, v.ClientSecret
		if !spec.ClientSecret {
			// A public client: it names itself and does not authenticate
			// (RFC 6749 3.2.1).
			form.Set("client_id", spec.ClientID)
			user = ""
		}
	}
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
	if user != "" {
		// client_secret_basic: both parts form-encoded first (RFC 6749 2.3.1).
		req.SetBasicAuth(url.QueryEscape(user), url.QueryEscape(pass))
	}
	resp, err := p.transport(g).RoundTrip(req.WithContext(ctx))
	if err != nil {
		return tokenEntry{}, deny(RuleOAuth2Token, "credential %s: the token endpoint %s could not be reached", quote(name), quote(t.host))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil || len(raw) > maxTokenResponse {
		return tokenEntry{}, deny(RuleOAuth2Token, "credential %s: the token endpoint's answer could not be read", quote(name))
	}
	var tr struct {
		AccessToken  string `json:"access_token"`
		TokenType    string `json:"token_type"`
		ExpiresIn    int64  `json:"expires_in"`
		RefreshToken string `json:"refresh_token"`
		Error        string `json:"error"`
	}
	jerr := json.Unmarshal(raw, &tr)
	if resp.StatusCode != http.StatusOK || jerr != nil || tr.AccessToken == "" {
		why := fmt.Sprintf("status %d", resp.StatusCode)
		if oauthErrorCodes.MatchString(tr.Error) {
			why += " (error " + tr.Error + ")"
			if tr.Error == "invalid_grant" && spec.RefreshGrant() {
				why += ": the refresh token was refused (revoked or expired); set a new one in " + SecretEnvPrefix + name
			}
		}
		return tokenEntry{}, deny(RuleOAuth2Token, "credential %s: the token endpoint %s gave no access token: %s", quote(name), quote(t.host), why)
	}
	if !strings.EqualFold(tr.TokenType, "bearer") || !credential.HeaderValue(tr.AccessToken) {
		return tokenEntry{}, deny(RuleOAuth2Token, "credential %s: the token endpoint %s gave a token maiden cannot send as a bearer token", quote(name), quote(t.host))
	}
	life := 5 * time.Minute // no expiry given: ask again soon rather than never
	if tr.ExpiresIn > 0 {
		// Bounded in seconds, before the multiplication can overflow.
		life = time.Duration(min(tr.ExpiresIn, int64(maxTokenLife/time.Second))) * time.Second
	}
	now := g.now()
	e := tokenEntry{Token: tr.AccessToken, Expires: now.Add(life), Scopes: strings.Join(spec.Scopes, " ")}
	// Refresh ahead: a tenth of the lifetime, at most a minute, early.
	e.Renew = e.Expires.Add(-min(life/10, time.Minute))
	if spec.RefreshGrant() {
		e.Refresh = refresh
		if tr.RefreshToken != "" {
			e.Refresh = tr.RefreshToken // rotated (RFC 6749 6, RFC 9700 4.14.2)
		}
	}
	return e, allowed
}
