//go:build e2e

package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/testkit/chaos"
	"github.com/fenceworks/fence/testkit/harness"
)

// TestMain removes the fence binary the harness built (about 36 MB in
// TMPDIR otherwise, one per run).
func TestMain(m *testing.M) {
	code := m.Run()
	harness.RemoveBuilds()
	os.Exit(code)
}

// These tests run three real `fence serve` processes (testkit/harness)
// whose servers serve the Forwarder: a client may call any node, and the
// Go client given several nodes fails over when the one it uses dies.

// testRaftArgs are raft timeouts short enough for a test and long enough
// not to flap on a loaded machine under -race.
var testRaftArgs = []string{"--heartbeat-timeout", "300ms", "--election-timeout", "600ms", "--leader-lease-timeout", "300ms"}

func startCluster(t *testing.T) (*harness.Cluster, *harness.Server, []*harness.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts three fence processes")
	}
	c := harness.StartClusterT(t, harness.ClusterConfig{N: 3, Args: testRaftArgs})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var followers []*harness.Server
	for _, s := range c.Nodes() {
		if s != leader {
			followers = append(followers, s)
		}
	}
	return c, leader, followers
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, urls string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(urls, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestForwarderServesThroughFollowers: every call made to a follower —
// unary, on a session's stream, reads, refusals — is answered by the
// leader as if asked there: the same grants, the same typed refusals with
// the same facts and words. A call marked forwarded that reaches a
// follower is answered unavailable and changes nothing.
func TestForwarderServesThroughFollowers(t *testing.T) {
	_, leader, followers := startCluster(t)
	ctx := ctxFor(t)
	direct := newClient(t, leader.URL(), client.WithoutSession())
	// A first grant, so that every later token has an older one below it.
	if _, err := direct.Acquire(ctx, "warm-up", client.TTL(time.Second), client.KeepAlive(-1)); err != nil {
		t.Fatal(err)
	}
	var last fence.Token
	for i, f := range followers {
		name := fmt.Sprintf("via-%d", i)
		for _, opts := range [][]client.Option{nil, {client.WithoutSession()}} {
			c := newClient(t, f.URL(), opts...)
			l, err := c.Acquire(ctx, name)
			if err != nil {
				t.Fatalf("acquire through %s: %v", f.ID(), err)
			}
			if l.Token() <= last {
				t.Fatalf("token %d through %s, want more than %d", l.Token(), f.ID(), last)
			}
			last = l.Token()
			if _, err := c.Write(ctx, name+"/res", l.Token(), []byte("v")); err != nil {
				t.Fatal(err)
			}
			r, err := c.Read(ctx, name+"/res")
			if err != nil || string(r.Value) != "v" || r.LastToken != l.Token() {
				t.Fatalf("read through %s = %+v, %v", f.ID(), r, err)
			}
			info, err := c.Get(ctx, name)
			if err != nil || info.Lease == nil || info.Lease.Token != l.Token() {
				t.Fatalf("get through %s = %+v, %v", f.ID(), info, err)
			}
			if locks, err := c.List(ctx, name); err != nil || len(locks) != 1 {
				t.Fatalf("list through %s = %+v, %v", f.ID(), locks, err)
			}

			// The same refusal, asked of the leader and of the follower.
			_, viaLeader := direct.Write(ctx, name+"/res", l.Token()-1, []byte("old"))
			_, viaFollower := c.Write(ctx, name+"/res", l.Token()-1, []byte("old"))
			var a, b *fence.StaleTokenError
			if !errors.As(viaLeader, &a) || !errors.As(viaFollower, &b) || *a != *b || viaLeader.Error() != viaFollower.Error() {
				t.Fatalf("stale write: leader said %v, follower %v; want the same *fence.StaleTokenError", viaLeader, viaFollower)
			}
			_, err = direct.Acquire(ctx, name, client.TTL(time.Second))
			var busy *fence.BusyError
			if !errors.As(err, &busy) || busy.Token != l.Token() {
				t.Fatalf("acquire of a held lock = %v, want BUSY naming token %d", err, l.Token())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A call another node forwarded (it comes through the raft port)
	// reaches a follower: refused, not passed on again.
	marked := client.NewService("http://"+followers[0].RaftAddr(), client.WithDialer(func(ctx context.Context, _, addr string) (net.Conn, error) { return raftstore.DialAPI(ctx, addr) }), client.WithHeader(cluster.ForwardedHeader, "1"))
	_, err := marked.Acquire(ctx, fence.AcquireRequest{Name: "marked", Owner: "o", TTL: 10 * time.Second})
	if !errors.Is(err, fence.ErrUnavailable) || fence.ReasonOf(err) != "" {
		t.Fatalf("forwarded call at a follower = %v, want unavailable", err)
	}
	if info, err := direct.Get(ctx, "marked"); err != nil || info.Lease != nil || info.LastToken != 0 {
		t.Fatalf("lock after a refused forwarded call: %+v, %v; want never granted", info, err)
	}
	// The same mark sent by a client to the client port means nothing:
	// the follower forwards the call as any other.
	spoofed := client.NewService(followers[0].URL(), client.WithHeader(cluster.ForwardedHeader, "1"))
	g, err := spoofed.Acquire(ctx, fence.AcquireRequest{Name: "spoofed", Owner: "o", TTL: 10 * time.Second})
	if err != nil || g.Lease.Token == 0 {
		t.Fatalf("a client's forwarded mark on the client port: %v, want the call forwarded and granted", err)
	}
}

// TestForwarderFollowsLeadership: leadership moves to each node in turn;
// a client of one fixed node keeps working whichever node leads, and
// tokens keep rising.
func TestForwarderFollowsLeadership(t *testing.T) {
	c, _, followers := startCluster(t)
	ctx := ctxFor(t)
	cl := newClient(t, followers[0].URL(), client.WithoutSession())
	var last fence.Token
	for round, target := range c.Nodes() {
		if _, err := c.Transfer(ctx, target); err != nil {
			t.Fatal(err)
		}
		l, err := cl.Acquire(ctx, fmt.Sprintf("moving-%d", round), client.TTL(5*time.Second), client.KeepAlive(-1))
		if err != nil {
			t.Fatalf("acquire through %s with %s leading: %v", followers[0].ID(), target.ID(), err)
		}
		if l.Token() <= last {
			t.Fatalf("token %d after leadership moved to %s, want more than %d", l.Token(), target.ID(), last)
		}
		last = l.Token()
	}
}

// TestClientFailsOverWhenItsNodeDies: a client given every node uses one;
// adders run on its session's stream; the node it uses is killed (kill
// -9), first the leader, then a follower. The stream moves to the next
// node, resends what had no reply with its seq, and every add is applied
// exactly once; the session and its lease live on, and later tokens are
// greater.
func TestClientFailsOverWhenItsNodeDies(t *testing.T) {
	c, leader, followers := startCluster(t)
	ctx := ctxFor(t)
	// The leader first: the client starts there, and the first kill is
	// the leader's.
	urls := []string{leader.URL(), followers[0].URL(), followers[1].URL()}
	cl := newClient(t, urls[0]+","+urls[1]+","+urls[2], client.WithBackoff(10*time.Millisecond, 200*time.Millisecond))
	l, err := cl.Acquire(ctx, "survivor")
	if err != nil {
		t.Fatal(err)
	}
	id := cl.SessionID()
	res := "survivor/counter"
	total := 0
	victim := leader
	for round := range 2 {
		if cl.Endpoint() != victim.URL() {
			t.Fatalf("round %d: the client uses %s, want %s", round, cl.Endpoint(), victim.URL())
		}
		const adders, each = 4, 40
		var wg sync.WaitGroup
		var done atomic.Int32
		errs := make(chan error, adders)
		for range adders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := cl.Add(ctx, res, l.Token(), 1); err != nil {
						errs <- err
						return
					}
					done.Add(1)
				}
			}()
		}
		for done.Load() < adders*each/4 {
			time.Sleep(time.Millisecond)
		}
		if err := victim.Kill(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: add across the death of %s: %v", round, victim.ID(), err)
		}
		total += adders * each
		if cl.Endpoint() == victim.URL() {
			t.Fatalf("round %d: the client still uses the dead %s", round, victim.ID())
		}
		r, err := cl.Read(ctx, res)
		if err != nil || string(r.Value) != fmt.Sprint(total) {
			t.Fatalf("round %d: counter %q, %v; want %d: every add applied exactly once", round, r.Value, err, total)
		}
		if cl.SessionID() != id || l.Err() != nil {
			t.Fatalf("round %d: session %d (was %d), lease err %v; want both to live on", round, cl.SessionID(), id, l.Err())
		}
		// Bring the dead node back, so that a majority is left after the
		// next kill, which is of the node the client uses now (a follower
		// or the new leader).
		if err := victim.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		for _, s := range c.Nodes() {
			if s.URL() == cl.Endpoint() {
				victim = s
			}
		}
	}
	later, err := cl.Acquire(ctx, "survivor/after", client.TTL(5*time.Second))
	if err != nil || later.Token() <= l.Token() {
		t.Fatalf("acquire after the failovers = %v, %v; want a token above %d", later, err, l.Token())
	}
}

// TestAcquireReplyLostInFailover: an acquire reaches the leader, is
// granted, and its reply is lost (the link back to the client drops it);
// then the leader is killed. The client retries on the next node — with
// the same session seq on the stream, with the same request_id without a
// session — and holds exactly the lease that was granted: one grant of the
// lock, whose token is the client's.
func TestAcquireReplyLostInFailover(t *testing.T) {
	c, leader, followers := startCluster(t)
	ctx := ctxFor(t)
	observer := newClient(t, followers[1].URL(), client.WithoutSession(), client.WithLogger(slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	for round, opts := range [][]client.Option{nil, {client.WithoutSession()}} {
		if round > 0 {
			// The previous round killed the leader: bring it back, and
			// find the new one.
			if err := leader.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			var err error
			if leader, err = c.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			followers = followers[:0]
			for _, s := range c.Nodes() {
				if s != leader {
					followers = append(followers, s)
				}
			}
			observer = newClient(t, followers[1].URL(), client.WithoutSession())
		}
		proxy, err := chaos.NewProxy("to-leader", leader.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		cl := newClient(t, "http://"+proxy.Addr()+","+followers[0].URL()+","+followers[1].URL(),
			append(opts, client.WithBackoff(10*time.Millisecond, 200*time.Millisecond), client.WithLogger(slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))))...)
		name := fmt.Sprintf("lost-reply-%d", round)
		// A first lease through the proxy opens the connections, and the
		// session and its stream if the client has one.
		warm, err := cl.Acquire(ctx, name+"/warm", client.Owner("lost"))
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if cl.Endpoint() != "http://"+proxy.Addr() {
			t.Fatalf("round %d: the client uses %s, want the proxy to the leader", round, cl.Endpoint())
		}
		t.Logf("round %d: warm at %s", round, time.Now().Format("15:04:05.000"))
		if err := proxy.Blackhole(chaos.Downstream); err != nil {
			t.Fatal(err)
		}
		got := make(chan *client.Lease, 1)
		errs := make(chan error, 1)
		go func() {
			l, err := cl.Acquire(ctx, name, client.Owner("lost"))
			if err != nil {
				errs <- err
				return
			}
			got <- l
		}()
		var granted fence.Token
		for granted == 0 {
			info, err := observer.Get(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if info.Lease != nil {
				granted = info.Lease.Token
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("round %d: granted %d at %s; killing %s", round, granted, time.Now().Format("15:04:05.000"), leader.ID())
		if err := leader.Kill(); err != nil {
			t.Fatal(err)
		}
		proxy.Close()
		var l *client.Lease
		select {
		case l = <-got:
		case err := <-errs:
			t.Fatalf("round %d: acquire across the lost reply and the failover: %v", round, err)
		}
		t.Logf("round %d: acquire returned at %s", round, time.Now().Format("15:04:05.000"))
		info, err := observer.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() != granted || info.Lease == nil || info.Lease.Token != granted || info.LastToken != granted {
			t.Fatalf("round %d: the client holds token %d; the lock %+v was granted %d: want exactly that one lease", round, l.Token(), info, granted)
		}
	}
}

// tlog writes a client's log lines to the test's log (shown when it
// fails): which endpoint each retry went to, and why.
type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) { l.t.Log(string(p)); return len(p), nil }

// TestSessionOpenReplyLost: the reply to a client's session Open is lost
// (the link back from the leader black-holed) until its attempt times out,
// after the session's TTL. The retry on the next node is answered with that
// session, whose time ran out meanwhile; the client must not adopt it (it
// would end at once, failing the acquire waiting on it) but open another,
// and the acquire succeeds.
func TestSessionOpenReplyLost(t *testing.T) {
	_, leader, followers := startCluster(t)
	ctx := ctxFor(t)
	proxy, err := chaos.NewProxy("to-leader", leader.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	if err := proxy.Blackhole(chaos.Downstream); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	cl := newClient(t, "http://"+proxy.Addr()+","+followers[0].URL()+","+followers[1].URL(),
		// The retry comes just before the session's end on the server:
		// answered with a few milliseconds left, or none.
		client.WithSessionTTL(ttl), client.WithAttemptTimeout(ttl-30*time.Millisecond), client.WithDrift(0.5), client.WithBackoff(10*time.Millisecond, 200*time.Millisecond),
		client.WithLogger(slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	l, err := cl.Acquire(ctx, "open-lost")
	if err != nil {
		t.Fatalf("acquire after a lost open reply: %v", err)
	}
	if l.Err() != nil || cl.SessionID() == 0 {
		t.Fatalf("lease err %v, session %d: want a live lease on a live session", l.Err(), cl.SessionID())
	}
}
