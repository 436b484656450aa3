package compcache

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Keyed serves callers that name an entry by one string, the digest of the
// component's bytes, a "-", then the engine fingerprint (the worker pool's
// Artifacts do). It keeps one Cache per fingerprint over the same checked
// directory, opened on first use.
type Keyed struct {
	dir string
	log *slog.Logger

	mu     sync.Mutex
	caches map[string]*Cache
}

// OpenKeyed checks dir as Open does (a directory that fails is refused) and
// returns a store over it.
func OpenKeyed(dir string, log *slog.Logger) (*Keyed, error) {
	c, err := Open(dir, "", log)
	if err != nil {
		return nil, err
	}
	k := &Keyed{dir: c.Dir(), log: c.log, caches: map[string]*Cache{}}
	c.Close()
	return k, nil
}

// Dir returns the checked directory (absolute, links resolved).
func (k *Keyed) Dir() string { return k.dir }

func (k *Keyed) cache(key string) (*Cache, string, error) {
	digest, fp, ok := strings.Cut(key, "-")
	if !ok || fp == "" {
		return nil, "", fmt.Errorf("compiled-component cache: key %q is not DIGEST-FINGERPRINT", key)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.caches[fp]; c != nil {
		return c, digest, nil
	}
	c, err := Open(k.dir, fp, k.log)
	if err != nil {
		return nil, "", err
	}
	k.caches[fp] = c
	return c, digest, nil
}

// Get returns the verified compiled code stored under key. Anything but a
// verified hit is a miss (refused entries are logged and removed).
func (k *Keyed) Get(key string) ([]byte, bool) {
	c, digest, err := k.cache(key)
	if err != nil {
		k.log.Warn("compiled-component cache unusable", "error", err)
		return nil, false
	}
	b, err := c.Load(digest)
	if err != nil {
		if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrRefused) {
			k.log.Warn("compiled-component cache", "error", err)
		}
		return nil, false
	}
	return b, true
}

// Put stores code under key with the record of its digest.
func (k *Keyed) Put(key string, code []byte) error {
	c, digest, err := k.cache(key)
	if err != nil {
		return err
	}
	return c.Put(digest, code)
}

// Close releases the directory handles.
func (k *Keyed) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for fp, c := range k.caches {
		c.Close()
		delete(k.caches, fp)
	}
	return nil
}
