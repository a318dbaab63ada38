//go:build e2e

package system_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/harness"
)

// A node that holds a Client's session stops answering (SIGSTOP) or dies
// (kill -9) while the Client holds a lease and waits on another lock. The
// Client leaves the node and its session moves to another one in time:
// the session keeps its id, the lease it held keeps its lock and token, and
// the acquire that was waiting through the stopped node is granted through
// another one when the lock is released (its retry keeps its seq: one
// wait, one grant). Over the Connect stream and over the lean port.
func TestSessionLeavesStoppedNode(t *testing.T) {
	testSessionLeavesNode(t, false, false, sigstop)
}

func TestSessionLeavesStoppedNodeLean(t *testing.T) {
	testSessionLeavesNode(t, true, false, sigstop)
}

func TestSessionLeavesKilledNode(t *testing.T) {
	testSessionLeavesNode(t, false, false, func(s *harness.Server) error { return s.Kill() })
}

func TestSessionLeavesKilledNodeLean(t *testing.T) {
	testSessionLeavesNode(t, true, false, func(s *harness.Server) error { return s.Kill() })
}

// The node holding the session is the leader, where Clients put their
// sessions: it stops, another is elected, and the session, its lease and
// its waiting acquire carry on there.
func TestSessionLeavesStoppedLeader(t *testing.T) {
	testSessionLeavesNode(t, false, true, sigstop)
}

func sigstop(s *harness.Server) error { return s.Signal(syscall.SIGSTOP) }

// stalledTTL is the session TTL of these tests: the stopped node is
// noticed a third of it after the keepalive it did not answer was sent.
const stalledTTL = 9 * time.Second

// testSessionLeavesNode stops (stop) the node that holds A's session: a
// follower listed first with WithEndpointsInOrder, or with onLeader the
// leader, where A's Client goes by itself.
func testSessionLeavesNode(t *testing.T, lean, onLeader bool, stop func(*harness.Server) error) {
	cfg := clusterConfig(3)
	leanAddr := map[string]string{}
	if lean {
		for _, id := range []string{"fence-1", "fence-2", "fence-3"} {
			a, err := harness.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			leanAddr[id] = a
		}
		cfg.NodeArgs = func(id string) []string { return []string{"--session-addr", leanAddr[id]} }
	}
	c := harness.StartClusterT(t, cfg)
	leader := waitLeader(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	// A's session sits on a follower (listed first, in order), the node
	// that will stop; or on the leader, listed last.
	var order []*harness.Server
	for _, n := range c.Nodes() {
		if n != leader {
			order = append(order, n)
		}
	}
	order = append(order, leader)
	stopped := order[0]
	if onLeader {
		stopped = leader
	}
	var urls, leans []string
	for _, n := range order {
		urls = append(urls, n.URL())
		leans = append(leans, leanAddr[n.ID()])
	}
	opts := []client.Option{client.WithSessionTTL(stalledTTL)}
	if !onLeader {
		opts = append(opts, client.WithEndpointsInOrder())
	}
	if lean {
		opts = append(opts, client.WithLeanSessions(leans...))
	}
	a, err := client.New(strings.Join(urls, ","), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// B holds the lock A will wait for; it talks to the leader, and
	// follows it when it stops.
	b, err := client.New(strings.Join(urls, ","), client.WithSessionTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	held, err := a.Acquire(ctx, "stall/held")
	if err != nil {
		t.Fatal(err)
	}
	sid := a.SessionID()
	if a.Endpoint() != stopped.URL() {
		t.Fatalf("A uses %s, want %s (%s)", a.Endpoint(), stopped.URL(), stopped.ID())
	}
	bl, err := b.Acquire(ctx, "stall/wait")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *client.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := a.Acquire(ctx, "stall/wait", client.Wait(time.Hour))
		got <- result{l, err}
	}()
	// A's acquire waits in the leader's queue (through the follower).
	for {
		info, err := b.Get(ctx, "stall/wait")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("A's acquire never queued")
		case <-time.After(10 * time.Millisecond):
		}
	}

	stoppedAt := time.Now()
	if err := stop(stopped); err != nil {
		t.Fatal(err)
	}
	defer stopped.Signal(syscall.SIGCONT)
	if err := bl.Release(ctx); err != nil {
		t.Fatal(err)
	}

	var r result
	select {
	case r = <-got:
	case <-held.Done():
		t.Fatalf("A's lease was lost while its session's node was stopped: %v", held.Err())
	}
	if r.err != nil {
		t.Fatalf("A's waiting acquire: %v", r.err)
	}
	// Said, not asserted: how long the grant waited for A to leave the node.
	t.Logf("granted through %s %v after %s stopped (session TTL %v)", a.Endpoint(), time.Since(stoppedAt).Round(time.Millisecond), stopped.ID(), stalledTTL)
	if r.l.Token() <= bl.Token() {
		t.Errorf("A's grant has token %d, not above B's %d", r.l.Token(), bl.Token())
	}
	if got := a.SessionID(); got != sid {
		t.Errorf("A's session is %d, was %d: it did not move, it was replaced", got, sid)
	}
	if a.Endpoint() == stopped.URL() {
		t.Errorf("A still uses the stopped node %s", stopped.URL())
	}
	select {
	case <-held.Done():
		t.Fatalf("A's lease was lost: %v", held.Err())
	default:
	}
	// The lease A held before the stop still holds its lock, with its token,
	// on the session that moved.
	info, err := b.Get(ctx, "stall/held")
	if err != nil {
		t.Fatal(err)
	}
	if info.Lease == nil || info.Lease.Token != held.Token() {
		t.Fatalf("stall/held is held by %+v, want A's token %d", info.Lease, held.Token())
	}
	// And the session goes on: a renew through it is answered.
	if err := held.Renew(ctx); err != nil {
		t.Fatalf("renewing A's lease after the move: %v", err)
	}
}
