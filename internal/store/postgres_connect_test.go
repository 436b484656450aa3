package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestPostgresConnectTimeoutDefault: a URL without connect_timeout gets
// the store's own (pgConnectTimeout), so Open against a server that
// accepts and never answers returns an error, even under a context with no
// deadline, instead of waiting for ever (pass 21's open plant:
// postgres.go's default dropped). No PostgreSQL server is needed: the
// listener is a loopback socket that accepts and reads nothing.
// Not parallel: it shortens the package's timeout while no other test
// runs (parallel tests start after the sequential ones end).
func TestPostgresConnectTimeoutDefault(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	defer func() {
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	}()
	defer func(d time.Duration) { pgConnectTimeout = d }(pgConnectTimeout)
	pgConnectTimeout = 200 * time.Millisecond

	target := fmt.Sprintf("postgres://maiden@%s/maiden?sslmode=disable", ln.Addr())
	type result struct {
		db  *DB
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		db, err := Open(context.Background(), target, &Options{})
		done <- result{db, err}
	}()
	select {
	case <-accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("Open did not connect to the listener in 30s")
	}
	select {
	case r := <-done:
		if r.err == nil {
			r.db.Close()
			t.Fatal("Open of a server that never answers: <nil>; want a timeout")
		}
		if !errors.Is(r.err, context.DeadlineExceeded) && !strings.Contains(r.err.Error(), "timeout") {
			t.Fatalf("Open of a server that never answers: %v; want a connect timeout", r.err)
		}
		t.Logf("Open returned after %v: %v", time.Since(start).Round(time.Millisecond), r.err)
	case <-time.After(15 * time.Second):
		t.Fatalf("Open of a server that accepts and never answers still waiting after 15s with a connect timeout of %v: the URL's missing connect_timeout got no default", pgConnectTimeout)
	}
}
