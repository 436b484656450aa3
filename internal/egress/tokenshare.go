package egress

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/maiden-run/maiden/internal/credential"
)

// Several instances of maiden on one PostgreSQL store share one access
// token per credential: the first that needs a new one takes a lease on
// the credential's row (a lock held across instances), asks the token
// endpoint, and stores the answer; the others wait on the lease and read
// it. Three instances whose token expired make one token request, not
// three, and a refresh token the endpoint rotated is the one every
// instance uses next.
//
// The database never holds a usable token. The row's name is a digest of
// the secret's name, endpoint, client, scopes and grant (no value); the
// row's content is sealed (AES-256-GCM, the row's name as additional
// data) under a key derived with HKDF-SHA256 from the credential's own
// values (the client secret, or the configured refresh token and client
// secret part). Whoever reads the database needs the secret to open it,
// and a rotated secret opens nothing stored under the old one (the row is
// then replaced). The ciphertext does let someone holding the database
// test guesses of the secret offline, as any value derived from it would:
// client secrets and refresh tokens are random strings, not passwords.

// TokenStore keeps sealed token rows under a lease shared by the
// instances of one store (internal/store's PostgreSQL implementation).
type TokenStore interface {
	// LeaseToken runs update while holding key's lease, which no other
	// instance holds at the same time, with the row stored for key (nil
	// if none). A non-nil result of update replaces the row; an error
	// leaves it and is returned. ErrNotShared, returned before update
	// runs, says this host shares nothing (a SQLite store, one process):
	// the gate keeps its tokens to itself.
	LeaseToken(ctx context.Context, key string, update func(stored []byte) ([]byte, error)) error
}

// ErrNotShared: the TokenStore does not share tokens between instances.
var ErrNotShared = errors.New("credential tokens are not shared by this store")

// shareKeyInfo separates this use of HKDF from any other.
const shareKeyInfo = "maiden oauth2 token row v1"

// shareRow is the row name of k: no value goes into it. The scopes are
// not in it: a refresh token the endpoint rotated stays the one to use
// when only the scopes asked for change (the row's entry says which
// scopes its access token has).
func shareRow(k tokenKey) string {
	h := sha256.Sum256([]byte(k.name + "\x00" + k.url + "\x00" + k.client + "\x00" + k.grant))
	return "oauth2:" + hex.EncodeToString(h[:])
}

// shareAEAD is the cipher of row's content, keyed by the credential's
// values v.
func shareAEAD(row string, v credential.Values) (cipher.AEAD, error) {
	ikm := []byte(v.Value + "\x00" + v.ClientSecret)
	key, err := hkdf.Key(sha256.New, ikm, []byte(row), shareKeyInfo, 32)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func sealEntry(a cipher.AEAD, row string, e tokenEntry) ([]byte, error) {
	plain, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, a.NonceSize())
	rand.Read(nonce)
	return a.Seal(nonce, nonce, plain, []byte(row)), nil
}

// openEntry opens a stored row; false if there is none or it was sealed
// under other values (a rotated secret) or altered.
func openEntry(a cipher.AEAD, row string, stored []byte) (tokenEntry, bool) {
	var e tokenEntry
	n := a.NonceSize()
	if len(stored) < n {
		return e, false
	}
	plain, err := a.Open(nil, stored[:n], stored[n:], []byte(row))
	if err != nil || json.Unmarshal(plain, &e) != nil {
		return tokenEntry{}, false
	}
	return e, true
}

// errTokenDenied stops a lease whose token request was refused: the row
// stays as it was.
var errTokenDenied = errors.New("token request refused")

// sharedToken is newToken through the shared store: under the lease, the
// stored token if it is fresh and not stale, else one from the endpoint
// (with the refresh token stored last, which another instance may have
// rotated, unless prev is an entry this instance could not store, whose
// refresh token is newer), stored for the others.
//
// A store that fails after the endpoint answered (its update or commit)
// does not lose what the endpoint gave: the endpoint has spent the refresh
// token it was sent, so the one it rotated to is the lineage's only valid
// one. The call gets the token and this instance keeps the entry, marked
// unsaved, until a later lease stores it; without that, the next request
// would send the spent refresh token again, which an endpoint that
// detects reuse (RFC 9700 4.14.2) answers by revoking the whole lineage.
// (The store's failure is not logged here: the gate's Audit logger gets
// one event per request.) A store that fails before the endpoint is asked
// refuses the call, with nothing sent.
// shared is false when the store shares nothing (ErrNotShared).
func (g *Gate) sharedToken(ctx context.Context, p *Policy, name string, k tokenKey, spec credential.Spec, v credential.Values, prev tokenEntry, authz Authorizer, stale string) (_ tokenEntry, _ Ruling, shared bool) {
	row := shareRow(k)
	a, err := shareAEAD(row, v)
	if err != nil {
		return tokenEntry{}, deny(RuleOAuth2Token, "credential %s: the shared token store cannot be used", quote(name)), true
	}
	var out tokenEntry
	d := allowed
	requested := false // out is the endpoint's answer, not the stored row
	err = g.share.LeaseToken(ctx, row, func(stored []byte) ([]byte, error) {
		out, requested = tokenEntry{}, false // a lease may run update again
		cur, ok := openEntry(a, row, stored)
		if ok && cur.fresh(g.now(), k.scopes, stale) {
			out = cur
			return nil, nil
		}
		refresh := prev.Refresh
		if ok && cur.Refresh != "" && !prev.unsaved {
			refresh = cur.Refresh
		}
		e, rd := g.requestToken(ctx, p, name, spec, v, refresh, authz)
		if !rd.Allow {
			d = rd
			return nil, errTokenDenied
		}
		out, requested = e, true
		return sealEntry(a, row, e)
	})
	switch {
	case errors.Is(err, ErrNotShared):
		return tokenEntry{}, allowed, false
	case !d.Allow:
		return tokenEntry{}, d, true
	case err != nil && requested:
		out.unsaved = true
		return out, allowed, true
	case err != nil:
		return tokenEntry{}, deny(RuleOAuth2Token, "credential %s: the shared token store failed", quote(name)), true
	}
	return out, allowed, true
}
