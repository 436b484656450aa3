package store

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/pgtest"
)

// Hostile review of the store across instances (several stores on one
// PostgreSQL database, as several maiden instances): what an instance
// keeps must never outlive a change committed elsewhere, and what is
// consumed once stays consumed once.

// partition is a loopback TCP proxy in front of the test cluster: an
// instance opened through it can be cut off from the database (freeze:
// nothing passes either way, nothing is closed, as a network partition),
// while the server still sees its connections.
type partition struct {
	ln     net.Listener
	frozen atomic.Bool
	thaw   chan struct{}
	mu     sync.Mutex
	conns  []net.Conn
	ports  []int // the proxy's local ports towards the server
	closed bool
}

func newPartition(t *testing.T) *partition {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{ln: ln, thaw: make(chan struct{})}
	target := pgtest.Addr(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				c.Close()
				s.Close()
				return
			}
			p.conns = append(p.conns, c, s)
			p.ports = append(p.ports, s.LocalAddr().(*net.TCPAddr).Port)
			p.mu.Unlock()
			go p.pipe(c, s)
			go p.pipe(s, c)
		}
	}()
	t.Cleanup(p.close)
	return p
}

// pipe copies from src to dst, holding what it read while frozen.
func (p *partition) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.frozen.Load() {
				<-p.thaw // closed by close: then the write fails or is dropped
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
}

func (p *partition) freeze() { p.frozen.Store(true) }

func (p *partition) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.ln.Close()
	close(p.thaw)
	for _, c := range p.conns {
		c.Close()
	}
}

// url is dbURL reached through the proxy.
func (p *partition) url(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// portList is the proxy's ports towards the server, as a SQL list.
// endFeeds has the server end the change feeds that connected through p
// (pg_terminate_backend, which waits until each backend is gone): a
// partition the server noticed, its instance not.
func (p *partition) endFeeds(t *testing.T, dbURL string) {
	t.Helper()
	pgtest.Exec(t, dbURL, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = '`+pgFeedApp+`' AND client_port IN (`+p.portList()+`)`)
}

func (p *partition) portList() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := make([]string, len(p.ports))
	for i, port := range p.ports {
		s[i] = strconv.Itoa(port)
	}
	return strings.Join(s, ",")
}

// waitRenewed waits until s's feed has read the counter again (renewing
// its lease), so that the lease has about feedLease left.
func waitRenewed(t *testing.T, s *DB) {
	t.Helper()
	f := s.pg.feed
	n := f.syncs.Load()
	deadline := time.Now().Add(30 * time.Second)
	for f.syncs.Load() == n {
		if time.Now().After(deadline) {
			t.Fatal("the change feed did not renew its lease within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	waitTrusted(t, s)
}

// TestPostgresRevokeWhileFeedVanishes: a revocation must hold on an
// instance whose change-feed connection the server has ended but which
// has not heard so (a partition: the server's goodbye is lost on the
// way, as after the server's tcp_user_timeout or keepalive, or an
// administrator's pg_terminate_backend of "idle" sessions). The writer
// no longer finds that feed in pg_stat_activity, so it waits for no
// acknowledgement; the instance still trusts its cards epoch until its
// lease runs out, and would keep honouring the revoked card and token
// with no round trip. The writer must therefore wait for the lease of a
// feed that vanished (feed_leases), so that when Revoke returns, B no
// longer answers from what it keeps.
func TestPostgresRevokeWhileFeedVanishes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	p := newPartition(t)
	b := open(t, p.url(t, dbURL), nil)
	t.Cleanup(p.close) // before b's Close (cleanups run last first)
	mustAgents(t, a, "x")
	c, err := a.Grant(ctx, "x", spec(t, "tool:invoke t"))
	if err != nil {
		t.Fatal(err)
	}
	waitTrusted(t, a)
	waitTrusted(t, b)
	if w, err := b.Wallet(ctx, "x", time.Now()); err != nil || len(w.Cards()) != 1 {
		t.Fatalf("B's wallet before the revocation: %v, %v", w, err)
	}
	gB, err := b.CardsGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitRenewed(t, b)
	p.freeze()
	// The server ends B's feed; B does not hear it (frozen). Waits until
	// the backend is gone (pg_terminate_backend's timeout).
	p.endFeeds(t, dbURL)
	if _, err := a.Revoke(ctx, Operator(), c.ID); err != nil {
		t.Fatal(err)
	}
	f := b.pg.feed
	stillTrusted := time.Since(f.start) < time.Duration(f.trusted.Load())
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	g, err := b.CardsGeneration(rctx)
	t.Logf("after the revocation returned: B's feed trusted %v, CardsGeneration %d (was %d), %v", stillTrusted, g, gB, err)
	if err == nil && g == gB {
		t.Fatalf("right after A's revocation returned, B (cut off, its feed ended by the server) still answers CardsGeneration %d from its lease: its call path would honour the revoked card", g)
	}
}

// TestPostgresFeedReconnectResyncs: a feed whose connection dropped
// (terminated by the server, kept from reconnecting) misses the
// notifications of that time; once it listens again, what B kept
// before (its wallet and token keyed on CardsGeneration, a session
// keyed on SessionsGeneration) must not be used: both epochs must have
// moved, and B's wallet and token answer the revocations committed
// meanwhile.
func TestPostgresFeedReconnectResyncs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	a := open(t, dbURL, nil)
	b := open(t, dbURL, nil)
	mustAgents(t, a, "x")
	c, err := a.Grant(ctx, "x", spec(t, "tool:invoke t"))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := a.MintToken(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.OpenSession(ctx, "s", "x", workBoundary()); err != nil {
		t.Fatal(err)
	}
	waitTrusted(t, b)
	gB, err := b.CardsGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sB, err := b.SessionsGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	f := b.pg.feed
	f.hold.Store(true)
	pgtest.Exec(t, dbURL, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = current_database() AND application_name = '`+pgFeedApp+`'`)
	deadline := time.Now().Add(10 * time.Second)
	for f.up.Load() {
		if time.Now().After(deadline) {
			t.Fatal("B's feed did not notice its connection was gone")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := a.Revoke(ctx, Operator(), c.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeToken(ctx, tok[len(tokenPrefix):len(tokenPrefix)+16]); err != nil {
		t.Fatal(err)
	}
	if err := a.EndSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	f.hold.Store(false)
	waitTrusted(t, b)
	if g, err := b.CardsGeneration(ctx); err != nil || g == gB {
		t.Fatalf("B's feed listens again with CardsGeneration %d (%v), as before the revocations it missed", g, err)
	}
	if g, err := b.SessionsGeneration(ctx); err != nil || g == sB {
		t.Fatalf("B's feed listens again with SessionsGeneration %d (%v), as before the session's end it missed", g, err)
	}
	if w, err := b.Wallet(ctx, "x", time.Now()); err != nil || len(w.Cards()) != 0 {
		t.Fatalf("B's wallet after the revocation: %v, %v", w, err)
	}
	if _, err := b.Authenticate(ctx, tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("B's Authenticate of the revoked token: %v", err)
	}
}

// TestPostgresCreateApprovalDedupAcrossInstances: identical calls asking
// for approval at once through three instances store one pending request
// (CreateApproval's look-up and insert are one transaction under the one
// write lock, and PostgreSQL's READ COMMITTED takes each statement's
// snapshot after the lock), so the human is asked once and the approval
// runs the call once.
func TestPostgresCreateApprovalDedupAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	stores := []*DB{open(t, dbURL, nil), open(t, dbURL, nil), open(t, dbURL, nil)}
	ids := make(chan string, 24)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 24 {
		s := stores[i%3]
		wg.Go(func() {
			<-start
			a, err := s.CreateApproval(ctx, Approval{Agent: "x", Tool: "t", Digest: "d", Middleware: "m", CardGeneration: 7,
				Expires: time.Now().Add(time.Hour)}, 0)
			if err != nil {
				t.Error(err)
				return
			}
			ids <- a.ID
		})
	}
	close(start)
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	n := pgtest.Exec(t, dbURL, `SELECT COUNT(*) FROM approvals WHERE agent = 'x' AND state = 'pending'`)
	if len(seen) != 1 || strings.TrimSpace(n) != "1" {
		t.Fatalf("24 identical requests through 3 instances: %d IDs returned, %s rows pending; want one", len(seen), n)
	}
	var id string
	for id = range seen {
	}
	if _, err := stores[0].Decide(ctx, id, true, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	for i := range 24 {
		s := stores[i%3]
		wg.Go(func() {
			if _, err := s.ConsumeAndStart(ctx, id, Binding{}); err == nil {
				wins.Add(1)
			} else if !errors.Is(err, ErrApprovalState) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d of 24 consumers on 3 instances started the approved call", wins.Load())
	}
	// Given back only by the instance that started it: each instance is
	// another runner, and exactly one of them holds the started call.
	back := 0
	for _, s := range stores {
		switch err := s.Unstart(ctx, id); {
		case err == nil:
			back++
		case !errors.Is(err, ErrApprovalState):
			t.Fatal(err)
		}
	}
	if back != 1 {
		t.Fatalf("%d instances gave back the started call, want the one that started it", back)
	}
	wantState(t, stores[0], id, ApprovalApproved)
}
