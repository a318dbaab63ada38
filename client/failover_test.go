package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
)

// The endpoints of these tests are several doors to one server (proxies,
// dead ports, a door that answers Unavailable): failover between them is
// what a client of a cluster does, and one server's state shows whether a
// retry on the next door was applied once. The forwarder's tests in
// package cluster run the same client against real nodes.

// deadURL is a loopback URL where nothing listens.
func deadURL(t *testing.T) string {
	ln := listenLoopback(t)
	ln.Close()
	return "http://" + ln.Addr().String()
}

// TestEndpointsList: New takes a comma list, WithEndpoints adds more,
// duplicates count once, and a bad entry is refused by name.
func TestEndpointsList(t *testing.T) {
	c, err := client.New(" http://a:1, http://b:2/,http://a:1 ", client.WithEndpointsInOrder(), client.WithEndpoints("http://c:3"), client.WithoutSession())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := c.Endpoints(), []string{"http://a:1", "http://b:2/", "http://c:3"}; !slices.Equal(got, want) {
		t.Fatalf("Endpoints() = %q, want %q", got, want)
	}
	if c.Endpoint() != "http://a:1" {
		t.Fatalf("Endpoint() = %q, want the first", c.Endpoint())
	}
	c2, err := client.New("", client.WithEndpointsInOrder(), client.WithEndpoints("http://c:3"))
	if err != nil || c2.Endpoint() != "http://c:3" {
		t.Fatalf("New(\"\", WithEndpoints) = %v, %v", c2, err)
	}
	c2.Close()
	for _, bad := range []string{"http://a:1,b:2", ",", "http://a:1,,ftp://x"} {
		if _, err := client.New(bad); err == nil || !strings.Contains(err.Error(), "want a URL like") {
			t.Errorf("New(%q) = %v, want a refusal", bad, err)
		}
	}
}

// TestFailoverFirstEndpointDead: the first endpoint refuses connections;
// every kind of call — session acquire, stream write, unary read, release
// — succeeds through the second, and the client stays there (sticky).
func TestFailoverFirstEndpointDead(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	proxy, live := newTCPProxy(t, serverURL)
	for _, opts := range [][]client.Option{nil, {client.WithoutSession()}, {client.WithFailFast()}} {
		dead := deadURL(t)
		c := newClientFor(t, dead+","+live, append(opts, client.WithEndpointsInOrder())...)
		l, err := c.Acquire(ctx, name)
		if err != nil {
			t.Fatalf("acquire with endpoint 1 dead: %v", err)
		}
		if _, err := c.Write(ctx, name+"/res", l.Token(), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if r, err := c.Read(ctx, name+"/res"); err != nil || string(r.Value) != "v" {
			t.Fatalf("read = %+v, %v", r, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if c.Endpoint() != live {
			t.Fatalf("Endpoint() = %s, want the live one %s", c.Endpoint(), live)
		}
	}
	if proxy.connections() == 0 {
		t.Fatal("nothing went through the live endpoint")
	}
}

// TestFailFastAllEndpointsDead: with WithFailFast, a call fails at once
// only when no endpoint can be reached, naming them all.
func TestFailFastAllEndpointsDead(t *testing.T) {
	ctx := ctxFor(t)
	a, b := deadURL(t), deadURL(t)
	_, err := newClientFor(t, a+","+b, client.WithEndpointsInOrder(), client.WithFailFast()).Read(ctx, "x")
	var un *client.UnreachableError
	if !errors.As(err, &un) || un.URL != a+","+b || ctx.Err() != nil {
		t.Fatalf("read = %v, want *UnreachableError naming %s,%s", err, a, b)
	}
}

// unavailableDoor answers every request 503 (Connect: Unavailable), as a
// node with no leader does, and counts them.
type unavailableDoor struct{ n atomic.Int32 }

func (d *unavailableDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.n.Add(1)
	http.Error(w, "no leader", http.StatusServiceUnavailable)
}

// TestFailoverOnUnavailableIsSticky: an endpoint that answers Unavailable
// is left for the next one, and later calls stay on the one that worked.
func TestFailoverOnUnavailableIsSticky(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	door := &unavailableDoor{}
	first := serveLoopback(t, door)
	c := newClientFor(t, first+","+serverURL, client.WithEndpointsInOrder(), client.WithoutSession())
	l, err := c.Acquire(ctx, name, client.KeepAlive(-1))
	if err != nil {
		t.Fatal(err)
	}
	if door.n.Load() != 1 {
		t.Fatalf("the unavailable endpoint got %d requests, want 1", door.n.Load())
	}
	for i := range 5 {
		if _, err := c.Write(ctx, name+"/res", l.Token(), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Get(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := door.n.Load(); n != 1 {
		t.Fatalf("the unavailable endpoint got %d requests, want 1: the client must stay on the endpoint that works", n)
	}
}

// TestFailoverAfterLostReplyIsExact: the first endpoint passes an Acquire
// on (the server grants it) and loses the reply; the retry goes to the
// second endpoint with the same request_id and gets that very lease — not
// BUSY, not a second grant.
func TestFailoverAfterLostReplyIsExact(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	lossy, first := newLossyProxy(t, serverURL, "Acquire")
	c := newClientFor(t, first+","+serverURL, client.WithEndpointsInOrder(), client.WithoutSession())
	l, err := c.Acquire(ctx, name, client.KeepAlive(-1))
	if err != nil {
		t.Fatalf("acquire across a lost reply and a failover: %v", err)
	}
	defer l.Release(ctx)
	if lossy.count() != 1 {
		t.Fatalf("the lossy endpoint saw %d acquires, want 1", lossy.count())
	}
	info, err := newClient(t).Get(ctx, name)
	if err != nil || info.Lease == nil || info.Lease.Token != l.Token() || info.LastToken != l.Token() {
		t.Fatalf("lock %+v, %v; want held by the one grant, token %d", info, err, l.Token())
	}
}

// TestSessionStreamFailsOverMidStream: adders run on a session whose
// stream goes through endpoint 1; endpoint 1 loses replies (the server
// applies the adds) and then dies. The stream reconnects on endpoint 2,
// resends every unanswered add with its seq, and each add is applied once:
// the counter equals the number of adds. The session and its lease live
// on.
func TestSessionStreamFailsOverMidStream(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	p1, u1 := newTCPProxy(t, serverURL)
	p2, u2 := newTCPProxy(t, serverURL)
	c := newClientFor(t, u1+","+u2, client.WithEndpointsInOrder(), client.WithSessionTTL(5*time.Second), client.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	id := c.SessionID()
	res := name + "/counter"
	const adders, each = 4, 30
	var wg sync.WaitGroup
	errs := make(chan error, adders)
	var done atomic.Int32
	for range adders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := c.Add(ctx, res, l.Token(), 1); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	// Some adds through endpoint 1, then its replies are lost while the
	// server still applies what arrives, then it dies.
	direct := newClient(t, client.WithoutSession())
	for done.Load() < adders*each/4 {
		time.Sleep(time.Millisecond)
	}
	p1.setDropReplies(true)
	waitValue(t, ctx, direct, res, func(v int) bool { return v >= int(done.Load())+1 })
	p1.stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("add across the failover: %v", err)
	}
	cur, err := direct.Read(ctx, res)
	if err != nil || string(cur.Value) != fmt.Sprint(adders*each) {
		t.Fatalf("counter %q, %v; want %d: every add applied exactly once", cur.Value, err, adders*each)
	}
	if c.Endpoint() != u2 || p2.connections() == 0 {
		t.Fatalf("endpoint %s (endpoint 2 had %d connections), want the stream on %s", c.Endpoint(), p2.connections(), u2)
	}
	if c.SessionID() != id || l.Err() != nil {
		t.Fatalf("session %d (was %d), lease err %v: the session must live on across the failover", c.SessionID(), id, l.Err())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitValue polls resource res (an integer) until ok holds.
func waitValue(t *testing.T, ctx context.Context, c *client.Client, res string, ok func(int) bool) {
	t.Helper()
	for {
		cur, err := c.Read(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		var v int
		fmt.Sscan(string(cur.Value), &v)
		if ok(v) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("resource %s stuck at %d", res, v)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestStandaloneKeepAliveFailsOver: a standalone lease's background
// renewals move to the next endpoint when the one in use dies, and the
// lease lives on past several TTLs.
func TestStandaloneKeepAliveFailsOver(t *testing.T) {
	t.Parallel() // waits out a TTL on proxies of its own
	// A machine loaded enough to starve the client for two thirds of a
	// TTL loses the lease at its safe deadline whichever endpoint it asks
	// (ErrDeadlinePassed): such a play says nothing of the failover and is
	// played again with the TTL doubled; renewals that never move to
	// endpoint 2 fail every play.
	for ttl := 2 * time.Second; ; ttl *= 2 {
		lost := standaloneKeepAliveFailsOver(t, ttl)
		if lost == nil {
			return
		}
		if ttl >= 8*time.Second {
			t.Fatalf("lease lost after its endpoint died, with TTLs 2s to %s: %v", ttl, lost)
		}
		t.Logf("TTL %s: the lease was lost at its safe deadline (the box too slow?): %v; again with TTL %s", ttl, lost, 2*ttl)
	}
}

// standaloneKeepAliveFailsOver plays TestStandaloneKeepAliveFailsOver once
// with a lease of ttl: it returns the lease's error when the lease was lost
// at its safe deadline, and fails t for any other outcome but success.
func standaloneKeepAliveFailsOver(t *testing.T, ttl time.Duration) error {
	t.Helper()
	ctx, name := ctxFor(t), uniq(t)
	p1, u1 := newTCPProxy(t, serverURL)
	p2, u2 := newTCPProxy(t, serverURL)
	c := newClientFor(t, u1+","+u2, client.WithEndpointsInOrder(), client.WithoutSession(), client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	l, err := c.Acquire(ctx, name, client.TTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	p1.stop()
	before := p2.connections()
	// Past the lease's safe deadline had no renewal succeeded since the
	// stop (the last one before it was at most TTL/3 earlier).
	time.Sleep(ttl + ttl/4)
	if err := l.Err(); errors.Is(err, client.ErrDeadlinePassed) && p2.connections() != before {
		return err // endpoint 2 was asked, but no renewal came in time
	} else if err != nil {
		t.Fatalf("lease lost after its endpoint died: %v", err)
	}
	if p2.connections() == before || c.Endpoint() != u2 {
		t.Fatalf("renewals did not move to endpoint 2 (%d connections, endpoint %s)", p2.connections(), c.Endpoint())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return nil
}

// TestFailoverNeedsNoBackoff: moving to an endpoint not yet tried costs no
// backoff pause, for a unary call and for the session's stream: with a
// backoff of an hour both get through on endpoint 2 as soon as endpoint 1
// is found dead.
func TestFailoverNeedsNoBackoff(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	p1, u1 := newTCPProxy(t, serverURL)
	_, u2 := newTCPProxy(t, serverURL)
	c := newClientFor(t, u1+","+u2, client.WithEndpointsInOrder(), client.WithBackoff(time.Hour, time.Hour))
	l, err := c.Acquire(ctx, name) // opens the session and its stream on endpoint 1
	if err != nil {
		t.Fatal(err)
	}
	p1.stop()
	if _, err := c.Add(ctx, name+"/n", l.Token(), 1); err != nil { // on the stream
		t.Fatalf("add after endpoint 1 died: %v", err)
	}
	unary := newClientFor(t, u1+","+u2, client.WithEndpointsInOrder(), client.WithoutSession(), client.WithBackoff(time.Hour, time.Hour))
	if _, err := unary.Read(ctx, name+"/n"); err != nil {
		t.Fatalf("unary read with endpoint 1 dead: %v", err)
	}
}

// flakyDoor answers 503 (Unavailable) to its first n requests, as a node
// waiting for a leader does, and passes the rest on to the server.
type flakyDoor struct {
	n     atomic.Int32
	proxy http.Handler
}

func (d *flakyDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.n.Add(-1) >= 0 {
		http.Error(w, "no leader yet", http.StatusServiceUnavailable)
		return
	}
	d.proxy.ServeHTTP(w, r)
}

// TestUnavailableAnswerBoundsBackoff: after a server's Unavailable answer
// the retry pause stops growing at 250ms, so a call comes back soon after
// a leader is elected: twelve refusals cost about 2s of pauses, where
// doubling from 10ms to the configured hour would cost 41s, more than the
// test's context.
func TestUnavailableAnswerBoundsBackoff(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	target, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	door := &flakyDoor{proxy: httputil.NewSingleHostReverseProxy(target)}
	door.n.Store(12)
	c := newClientFor(t, serveLoopback(t, door), client.WithoutSession(), client.WithBackoff(10*time.Millisecond, time.Hour))
	if _, err := c.Get(ctx, name); err != nil {
		t.Fatalf("get after 12 Unavailable answers: %v", err)
	}
}
