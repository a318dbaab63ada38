package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/daemon"
	"github.com/fenceworks/fence/node"
)

// The race these tests stage — leadership leaving the local node between
// IsLeader and the call — cannot be timed with real nodes, so the local
// node is scripted here (scriptedNode, refusingService). The leader on the
// other side is a real server, reached through the forwarder's own dial
// and remote Service. The cluster tests (forwarder_test.go) run the
// Forwarder on real nodes.

// scriptedNode answers IsLeader from a script (true, then false, ...), and
// names a leader at addr.
type scriptedNode struct {
	mu      sync.Mutex
	leading []bool
	addr    string
}

func (n *scriptedNode) IsLeader() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.leading) == 0 {
		return false
	}
	v := n.leading[0]
	n.leading = n.leading[1:]
	return v
}

func (n *scriptedNode) Leader() (string, string) { return "leader", n.addr }
func (n *scriptedNode) ID() string               { return "local" }

// refusingService fails every call with err, counting them.
type refusingService struct {
	fence.Service // nil: only Acquire and Write are called
	err           error
	calls         atomic.Int32
}

func (s *refusingService) Acquire(context.Context, fence.AcquireRequest) (fence.Grant, error) {
	s.calls.Add(1)
	return fence.Grant{}, s.err
}

func (s *refusingService) Write(context.Context, fence.WriteRequest) (fence.Written, error) {
	s.calls.Add(1)
	return fence.Written{}, s.err
}

// leaderServer starts a real single-node server and returns its API
// address and a dial function to it that counts its dials.
func leaderServer(t *testing.T) (addr string, dial cluster.DialFunc, dials *atomic.Int32) {
	t.Helper()
	s, err := daemon.New(daemon.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	dials = new(atomic.Int32)
	return ln.Addr().String(), func(ctx context.Context, raftAddr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, "tcp", raftAddr)
	}, dials
}

// TestForwarderResendsOnlyWhatWasNotProposed: a call the local node refused
// with node.ErrNotLeader (nothing proposed) goes to the leader, once, and is
// granted there; a call whose outcome the local node does not know is
// returned as it is and never sent again; neither is passed on when the
// call was itself forwarded.
func TestForwarderResendsOnlyWhatWasNotProposed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, dial, dials := leaderServer(t)
	notLeader := fmt.Errorf("%w (%w)", node.ErrNotLeader, fence.ErrUnavailable)
	unknown := fmt.Errorf("%w (%w)", node.ErrUnknownOutcome, fence.ErrUnavailable)

	local := &refusingService{err: notLeader}
	f := cluster.NewForwarder(local, &scriptedNode{leading: []bool{true}, addr: addr}, dial, remoteService)
	defer f.Close()
	g, err := f.Acquire(ctx, fence.AcquireRequest{Name: "resent", Owner: "o", TTL: 10 * time.Second, RequestID: "r"})
	if err != nil || g.Lease.Token == 0 {
		t.Fatalf("acquire refused locally before proposing: %+v, %v; want it granted by the leader", g, err)
	}
	if local.calls.Load() != 1 || dials.Load() != 1 {
		t.Fatalf("local calls %d, dials to the leader %d; want 1 and 1", local.calls.Load(), dials.Load())
	}

	for _, tc := range []struct {
		name      string
		err       error
		forwarded bool
	}{
		{"unknown outcome", unknown, false},
		{"forwarded, not leader", notLeader, true},
	} {
		local := &refusingService{err: tc.err}
		dials.Store(0)
		f := cluster.NewForwarder(local, &scriptedNode{leading: []bool{true}, addr: addr}, dial, remoteService)
		cctx := ctx
		if tc.forwarded {
			cctx = cluster.WithForwarded(ctx)
		}
		_, err := f.Write(cctx, fence.WriteRequest{Resource: "r", Token: g.Lease.Token, Value: []byte("v"), OpID: "w"})
		if !errors.Is(err, tc.err) || !errors.Is(err, fence.ErrUnavailable) {
			t.Fatalf("%s: write = %v, want the local error returned", tc.name, err)
		}
		if local.calls.Load() != 1 || dials.Load() != 0 {
			t.Fatalf("%s: local calls %d, dials %d; want 1 and 0: nothing may be sent again", tc.name, local.calls.Load(), dials.Load())
		}
		f.Close()
	}
}

// TestForwarderRoutes: a node that does not lead sends calls to the
// leader it knows, with the forwarded mark; one that knows no leader, or
// leads without being in office, or gets a forwarded call, answers
// unavailable at once and dials nobody.
func TestForwarderRoutes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, dial, dials := leaderServer(t)
	local := &refusingService{err: errors.New("the local node must not be called")}

	f := cluster.NewForwarder(local, &scriptedNode{addr: addr}, dial, remoteService)
	defer f.Close()
	if _, err := f.Acquire(ctx, fence.AcquireRequest{Name: "routed", Owner: "o", TTL: 10 * time.Second}); err != nil {
		t.Fatalf("acquire through the leader: %v", err)
	}
	// The leader's server, asked directly with the mark, sees a call it
	// serves itself (a single node leads): the mark does not refuse there.
	if _, err := f.Acquire(ctx, fence.AcquireRequest{Name: "routed", Owner: "p", TTL: time.Second}); !errors.Is(err, fence.ErrBusy) {
		t.Fatalf("second acquire = %v, want BUSY from the leader", err)
	}
	if dials.Load() != 1 {
		t.Fatalf("%d dials, want 1: the remote Service is kept for its leader", dials.Load())
	}

	dials.Store(0)
	for _, tc := range []struct {
		name string
		n    cluster.Leadership
		ctx  context.Context
		want error
	}{
		{"no leader", &scriptedNode{}, ctx, cluster.ErrNoLeader},
		{"forwarded to a follower", &scriptedNode{addr: addr}, cluster.WithForwarded(ctx), cluster.ErrNoHop},
		{"elected, not in office", selfLeader{}, ctx, node.ErrNotLeader},
	} {
		_, err := cluster.NewForwarder(local, tc.n, dial, remoteService).Get(tc.ctx, "routed")
		if !errors.Is(err, tc.want) || !errors.Is(err, fence.ErrUnavailable) || !errors.Is(err, node.ErrNotLeader) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if local.calls.Load() != 0 || dials.Load() != 0 {
		t.Fatalf("local calls %d, dials %d; want none", local.calls.Load(), dials.Load())
	}
	if !strings.Contains(cluster.ErrNoHop.Error(), "not passed on again") {
		t.Fatalf("cluster.ErrNoHop says %q", cluster.ErrNoHop)
	}
}

// selfLeader: raft elected this node, which has not taken office.
type selfLeader struct{}

func (selfLeader) IsLeader() bool           { return false }
func (selfLeader) Leader() (string, string) { return "local", "127.0.0.1:1" }
func (selfLeader) ID() string               { return "local" }

// TestForwarderDialGivesUp: a leader whose raft port swallows connection
// attempts (a partition drops them without an answer) costs a forwarded
// call DialTimeout, not the caller's whole context: it fails unavailable
// while the caller still has time to try another node.
func TestForwarderDialGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	silent := func(ctx context.Context, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f := cluster.NewForwarder(&refusingService{}, &scriptedNode{addr: "10.255.255.1:7421"}, silent, remoteService)
	defer f.Close()
	_, err := f.Get(ctx, "x")
	if !errors.Is(err, fence.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("get via a silent leader = %v (caller's ctx %v), want unavailable before the caller's context ends", err, ctx.Err())
	}
}
