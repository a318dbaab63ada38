package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/state"
	"github.com/fenceworks/fence/testkit/testutil"
)

// Cluster tests: in-process nodes with raft over real TCP on loopback (the
// raftstore mux), each in its own temp data dir.

// clusterWait bounds every wait for the cluster to reach a state; it is a
// hang guard, not a performance bound.
const clusterWait = 30 * time.Second

// testTimeouts are raft timeouts short enough for tests and long enough
// not to flap on a loaded 2-core machine under -race.
func testTimeouts(c *Config) {
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 600 * time.Millisecond
	c.LeaderLeaseTimeout = 300 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}

// member is one node of a test cluster and what it needs to restart.
type member struct {
	id   string
	dir  string
	mux  *raftstore.Mux
	node *Node
	cfg  Config
}

type testCluster struct {
	t       *testing.T
	members []*member
	proxies *linkProxies // nil unless built with links
}

// clusterOpts shape a test cluster.
type clusterOpts struct {
	n       int
	links   bool          // every directed peer link through a proxy the test can cut
	tweak   func(*Config) // applied to every node's config
	joiners int           // extra members started in join mode (not in Peers)
}

// startCluster starts opts.n nodes bootstrapped with the same static
// Peers (plus opts.joiners empty nodes), and waits for a leader.
func startCluster(t *testing.T, opts clusterOpts) *testCluster {
	t.Helper()
	tc := &testCluster{t: t}
	total := opts.n + opts.joiners
	if opts.links {
		tc.proxies = newLinkProxies(t)
	}
	// Bind every port first: the peers list needs the addresses, and the
	// dial map needs them to place the proxies.
	muxes := make([]*raftstore.Mux, total)
	lns := make([]net.Listener, total)
	addrs := make([]string, total)
	for i := range total {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	var peers []Peer
	for i := range opts.n {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: addrs[i]})
	}
	for i := range total {
		var mopts []raftstore.MuxOption
		if tc.proxies != nil {
			dm := map[string]string{}
			for j := range total {
				if j != i {
					dm[addrs[j]] = tc.proxies.add(i, j, addrs[j])
				}
			}
			mopts = append(mopts, raftstore.WithDialer(raftstore.MapDialer(dm)))
		}
		lns[i].Close() // rebind the same port in the mux
		m, err := raftstore.Listen(addrs[i], "", mopts...)
		if err != nil {
			t.Fatal(err)
		}
		muxes[i] = m
	}
	for i := range total {
		mb := &member{id: fmt.Sprintf("n%d", i+1), dir: t.TempDir(), mux: muxes[i]}
		cfg := Config{DataDir: mb.dir, NodeID: mb.id, Mux: mb.mux, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if i < opts.n {
			cfg.Peers = peers
		}
		testTimeouts(&cfg)
		cfg.OnFatal = func(err error) { t.Errorf("node %s: fatal: %v", mb.id, err) }
		if opts.tweak != nil {
			opts.tweak(&cfg)
		}
		mb.cfg = cfg
		tc.members = append(tc.members, mb)
	}
	for _, mb := range tc.members {
		tc.open(mb)
	}
	t.Cleanup(tc.close)
	tc.leaderAmong(tc.members[:opts.n])
	return tc
}

// open opens mb's node with its config (a restart if it ran before).
func (tc *testCluster) open(mb *member) {
	tc.t.Helper()
	n, err := Open(mb.cfg)
	if err != nil {
		tc.t.Fatalf("Open(%s): %v", mb.id, err)
	}
	mb.node = n
}

// kill closes mb's node without handing leadership over, like a crash of
// the process (its log is as durable as fsync made it).
func (tc *testCluster) kill(mb *member) {
	tc.t.Helper()
	var err error
	if !within(tc.t, "close "+mb.id, func() { err = mb.node.close(false) }) {
		tc.t.FailNow()
	}
	if err != nil {
		tc.t.Fatalf("close %s: %v", mb.id, err)
	}
}

// close closes every member and its raft port, each within the hang
// guard: a member whose close hangs is reported (with every goroutine)
// and left behind, and the others are still closed, so that a live peer
// does not go on sending to it for the rest of the run.
func (tc *testCluster) close() {
	for _, mb := range tc.members {
		if mb.node != nil {
			within(tc.t, "close "+mb.id+" at cleanup", func() { mb.node.close(false) })
		}
	}
	for _, mb := range tc.members {
		within(tc.t, "close the raft port of "+mb.id+" at cleanup", func() { mb.mux.Close() })
	}
}

// live are the members whose node is not closed.
func (tc *testCluster) live() []*member {
	var out []*member
	for _, mb := range tc.members {
		select {
		case <-mb.node.closing:
		default:
			out = append(out, mb)
		}
	}
	return out
}

// leader waits until exactly one live member is in office and every live
// member that is a voter knows it, and returns it.
func (tc *testCluster) leader() *member {
	tc.t.Helper()
	return tc.leaderAmong(tc.live())
}

func (tc *testCluster) leaderAmong(ms []*member) *member {
	tc.t.Helper()
	deadline := time.Now().Add(clusterWait)
	for time.Now().Before(deadline) {
		var leaders []*member
		for _, mb := range ms {
			if mb.node.IsLeader() {
				leaders = append(leaders, mb)
			}
		}
		if len(leaders) == 1 {
			agreed := true
			for _, mb := range ms {
				if id, _ := mb.node.Leader(); id != leaders[0].id {
					agreed = false
				}
			}
			if agreed {
				return leaders[0]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	tc.t.Fatalf("no single leader in office among %d members within %s", len(ms), clusterWait)
	return nil
}

// caughtUp waits until every member in ms has applied (in its FSM) what
// the leader has applied, and is Ready. The leader's last entry must be a
// command (followers' FSMs are not handed noop and barrier entries).
func (tc *testCluster) caughtUp(ms []*member, lead *member) {
	tc.t.Helper()
	want := lead.node.fsm.applied.Load()
	deadline := time.Now().Add(clusterWait)
	for _, mb := range ms {
		for mb.node.fsm.applied.Load() < want || !mb.node.Ready() {
			if time.Now().After(deadline) {
				tc.t.Fatalf("%s: applied %d (want %d), ready %v", mb.id, mb.node.fsm.applied.Load(), want, mb.node.Ready())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// transferTo moves leadership to to. Raft gives a transfer up when its
// target has not won within an election timeout (a loaded machine); that
// is retried, with clusterWait as the hang guard: the tests that use it
// are about what follows a transfer, not about its first attempt.
func (tc *testCluster) transferTo(to *member) {
	tc.t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		lead := tc.leader()
		if lead == to {
			return
		}
		err := lead.node.TransferLeadership(context.Background(), to.id)
		if err != nil && !strings.Contains(err.Error(), "leadership transfer timeout") {
			tc.t.Fatalf("transfer from %s to %s: %v", lead.id, to.id, err)
		}
		if time.Now().After(deadline) {
			tc.t.Fatalf("leadership never moved to %s (last: %v)", to.id, err)
		}
	}
}

func (tc *testCluster) others(not *member) []*member {
	var out []*member
	for _, mb := range tc.live() {
		if mb != not {
			out = append(out, mb)
		}
	}
	return out
}

func grant(t *testing.T, n *Node, name string) fence.Token {
	t.Helper()
	return mustApply(t, n, acquire(name, time.Hour)).Lease.Token
}

func write(t *testing.T, n *Node, resource string, tok fence.Token, value, opID string) {
	t.Helper()
	mustApply(t, n, state.Command{Op: state.OpWrite, Name: resource, Token: tok, Value: []byte(value), OpID: opID})
}

// resourceOn reads a resource from mb's applied state directly (a
// follower answers no reads through the API).
func resourceOn(mb *member, name string) state.ResourceState {
	var rs state.ResourceState
	mb.node.fsm.read(func(m *state.Machine) { rs = m.Resource(name) })
	return rs
}

// Three nodes elect one leader; writes on it replicate to the followers;
// followers refuse writes and reads with ErrNotLeader (nothing proposed,
// no stale answer) and know who leads.
func TestClusterElectsReplicatesAndFollowersRefuse(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	ctx := context.Background()

	tok := grant(t, lead.node, "a")
	write(t, lead.node, "stock", tok, "42", "w1")
	tc.caughtUp(tc.members, lead)
	for _, mb := range tc.members {
		if rs := resourceOn(mb, "stock"); string(rs.Value) != "42" || rs.LastToken != tok {
			t.Fatalf("%s: stock = %+v, want 42 by token %d", mb.id, rs, tok)
		}
	}
	leadID, leadAddr := lead.node.Leader()
	if leadID != lead.id || leadAddr != lead.mux.Addr() {
		t.Fatalf("leader reports leader %s@%s, want %s@%s", leadID, leadAddr, lead.id, lead.mux.Addr())
	}
	for _, f := range tc.others(lead) {
		if id, addr := f.node.Leader(); id != lead.id || addr != lead.mux.Addr() {
			t.Fatalf("%s: Leader() = %s@%s, want %s@%s", f.id, id, addr, lead.id, lead.mux.Addr())
		}
		if f.node.IsLeader() {
			t.Fatalf("%s: IsLeader on a follower", f.id)
		}
		before := f.node.props.groups.Load()
		if _, err := f.node.Apply(ctx, acquire("b", time.Hour)); !errors.Is(err, ErrNotLeader) || errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("%s: Apply on a follower: %v, want ErrNotLeader (nothing proposed)", f.id, err)
		}
		if _, err := f.node.Apply(ctx, state.Command{Op: state.OpAcquire, Name: "b", Owner: "x", TTL: time.Hour, Wait: time.Second}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("%s: waiting acquire on a follower: %v, want ErrNotLeader", f.id, err)
		}
		if f.node.props.groups.Load() != before {
			t.Fatalf("%s: a follower proposed", f.id)
		}
		if _, err := f.node.Resource(ctx, "stock"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("%s: read on a follower: %v, want ErrNotLeader", f.id, err)
		}
		if _, err := f.node.Lock(ctx, "a"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("%s: lock read on a follower: %v, want ErrNotLeader", f.id, err)
		}
		if err := f.node.AddVoter(ctx, "n9", "127.0.0.1:1"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("%s: AddVoter on a follower: %v, want ErrNotLeader", f.id, err)
		}
		st := f.node.Status()
		if st.Role != "Follower" || st.LeaderID != lead.id || !st.Ready() || st.ID != f.id || st.RaftAddr != f.mux.Addr() {
			t.Fatalf("%s: status %+v", f.id, st)
		}
	}
	if rs, err := lead.node.Resource(ctx, "stock"); err != nil || string(rs.Value) != "42" {
		t.Fatalf("leader read: %+v, %v", rs, err)
	}
	ms, err := tc.members[2].node.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("members = %+v", ms)
	}
	for i, m := range ms {
		if m.ID != tc.members[i].id || m.Addr != tc.members[i].mux.Addr() || !m.Voter {
			t.Fatalf("member %d = %+v", i, m)
		}
	}
}

// Kill the leader (no hand-over): the others elect a new one whose tokens
// are greater than every token granted before, with every acknowledged
// grant and write still there; the killed node restarts from its data
// dir, rejoins as a follower and catches up.
func TestClusterLeaderKillKeepsTokensAndWrites(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	var last fence.Token
	for i := range 20 {
		tok := grant(t, lead.node, fmt.Sprintf("lock-%d", i))
		if tok <= last {
			t.Fatalf("token %d after %d", tok, last)
		}
		last = tok
		write(t, lead.node, fmt.Sprintf("res-%d", i), tok, fmt.Sprint(i), fmt.Sprintf("op-%d", i))
	}
	tc.kill(lead)

	next := tc.leaderAmong(tc.others(lead))
	tok := grant(t, next.node, "after")
	if tok <= last {
		t.Fatalf("first token after the failover %d, not above the last before (%d)", tok, last)
	}
	ctx := context.Background()
	for i := range 20 {
		rs, err := next.node.Resource(ctx, fmt.Sprintf("res-%d", i))
		if err != nil || string(rs.Value) != fmt.Sprint(i) {
			t.Fatalf("acknowledged write res-%d after failover: %+v, %v", i, rs, err)
		}
		li, err := next.node.Lock(ctx, fmt.Sprintf("lock-%d", i))
		if err != nil || li.Lease == nil {
			t.Fatalf("acknowledged grant lock-%d after failover: %+v, %v", i, li, err)
		}
	}
	// The killed node restarts with its data dir on its address (bootstrap
	// options are ignored: it has raft state) and follows.
	tc.open(lead)
	tc.caughtUp(tc.members, next)
	if lead.node.IsLeader() && next.node.IsLeader() {
		t.Fatal("two leaders in office")
	}
	if rs := resourceOn(lead, "res-19"); string(rs.Value) != "19" {
		t.Fatalf("restarted node: res-19 = %+v", rs)
	}
}

// A removed node cannot grant: it refuses with ErrNotLeader, never stands
// for election (it is in no configuration), and the others go on.
func TestClusterRemovedNodeCannotGrant(t *testing.T) {
	t.Parallel() // mostly a watch of ten election timeouts on a cluster of its own
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	ctx := context.Background()
	victim := tc.others(lead)[0]
	grant(t, lead.node, "before")
	if err := lead.node.RemoveServer(ctx, victim.id); err != nil {
		t.Fatal(err)
	}
	ms, err := lead.node.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == victim.id {
			t.Fatalf("%s still a member after its removal: %+v", victim.id, ms)
		}
	}
	// Many election timeouts: a removed node that stood for election
	// (and won) would show here.
	deadline := time.Now().Add(10 * victim.cfg.ElectionTimeout)
	for time.Now().Before(deadline) {
		if _, err := victim.node.Apply(ctx, acquire("removed", time.Hour)); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("removed node's Apply: %v, want ErrNotLeader", err)
		}
		if victim.node.IsLeader() {
			t.Fatal("removed node in office")
		}
		time.Sleep(50 * time.Millisecond)
	}
	rest := tc.others(victim)
	next := tc.leaderAmong(rest)
	if tok := grant(t, next.node, "after"); tok <= 1 {
		t.Fatalf("token %d after removal", tok)
	}
	if li, err := next.node.Lock(ctx, "removed"); err != nil || li.Lease != nil {
		t.Fatalf("the removed node's acquire is held: %+v, %v", li, err)
	}
}

// A node added to a running cluster receives its state, by a snapshot
// install when the log it needs was compacted away. (Small WAL segments:
// raft-wal still serves entries below its first index while their segment
// exists, so with 64 MiB segments a joiner gets the log instead.)
func TestClusterAddedNodeReceivesState(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc := startCluster(t, clusterOpts{n: 2, joiners: 1, tweak: func(c *Config) {
		c.SnapshotThreshold = 16
		c.TrailingLogs = 4
		c.WALSegmentSize = 4 << 10
	}})
	lead := tc.leaderAmong(tc.members[:2])
	joiner := tc.members[2]
	if joiner.node.Ready() {
		t.Fatal("a node waiting to be added reports ready")
	}
	var last fence.Token
	for i := range 60 {
		last = grant(t, lead.node, fmt.Sprintf("l%d", i))
		write(t, lead.node, "counter", last, fmt.Sprint(i), fmt.Sprintf("w%d", i))
	}
	// Wait until the leader's log is compacted past its first entries: the
	// joiner cannot be sent the log from the start.
	deadline := time.Now().Add(clusterWait)
	for i := 0; ; i++ {
		first, err := lead.node.log.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		if first > 2 && lead.node.log.GetLog(1, new(raft.Log)) != nil {
			break // entry 1's segment is gone too
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader's log was not compacted (first index %d, %d snapshots)", first, lead.node.snap.taken.Load())
		}
		write(t, lead.node, "pad", last, fmt.Sprint(i), fmt.Sprintf("p%d", i)) // fills segments until the first is deleted
	}
	ctx := context.Background()
	if err := lead.node.AddVoter(ctx, joiner.id, joiner.mux.Addr()); err != nil {
		t.Fatal(err)
	}
	tc.caughtUp([]*member{joiner}, lead)
	if joiner.node.fsm.restores.Load() == 0 {
		t.Fatal("the added node caught up without a snapshot install (raise the writes or lower TrailingLogs)")
	}
	if rs := resourceOn(joiner, "counter"); string(rs.Value) != "59" || rs.LastToken != last {
		t.Fatalf("added node: counter = %+v", rs)
	}
	ms, err := joiner.node.Members(ctx)
	if err != nil || len(ms) != 3 {
		t.Fatalf("members on the added node: %+v, %v", ms, err)
	}
	// It is a voter: with one of the two others gone it makes a quorum.
	tc.kill(tc.others(lead)[0])
	if tok := grant(t, tc.leaderAmong(tc.live()).node, "quorum"); tok <= last {
		t.Fatalf("token %d not above %d", tok, last)
	}
}

// Close on a leader hands leadership over: the followers' own election
// timers are set to a minute, so a leader within the wait can only come
// from the transfer.
func TestClusterCloseHandsLeadershipOver(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	last := grant(t, lead.node, "x")
	for _, f := range tc.others(lead) {
		rc := f.node.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = time.Minute, time.Minute
		if err := f.node.raft.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	if err := lead.node.Close(); err != nil {
		t.Fatal(err)
	}
	next := tc.leaderAmong(tc.others(lead))
	if tok := grant(t, next.node, "y"); tok <= last {
		t.Fatalf("token %d after hand-over, not above %d", tok, last)
	}
}

// A leader cut off from the others: what it proposed and could not commit
// is an unknown outcome (never ErrNotLeader, which would let a forwarder
// send it elsewhere without its id); its reads are refused (no stale
// answer); the majority elects a leader whose tokens continue upward; after
// healing the old leader follows and has the majority's state, not its own
// uncommitted entry.
func TestClusterIsolatedLeader(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3, links: true})
	lead := tc.leader()
	last := grant(t, lead.node, "a")
	idx := map[*member]int{}
	for i, mb := range tc.members {
		idx[mb] = i
	}
	tc.proxies.isolate(idx[lead])

	ctx := context.Background()
	_, err := lead.node.Apply(ctx, state.Command{Op: state.OpWrite, Name: "iso", Token: last, Value: []byte("lost"), OpID: "iso"})
	switch {
	case errors.Is(err, ErrUnknownOutcome) && !errors.Is(err, ErrNotLeader):
	case errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrUnknownOutcome):
		// Deposed before it proposed: nothing was proposed.
	default:
		t.Fatalf("write on an isolated leader: %v, want an unknown outcome (or ErrNotLeader before proposing)", err)
	}
	if _, err := lead.node.Resource(ctx, "r"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("read on an isolated leader: %v, want ErrNotLeader", err)
	}
	rest := tc.others(lead)
	next := tc.leaderAmong(rest)
	tok := grant(t, next.node, "b")
	if tok <= last {
		t.Fatalf("majority token %d not above %d", tok, last)
	}
	write(t, next.node, "r", tok, "majority", "maj")
	tc.proxies.heal()
	tc.caughtUp(tc.members, tc.leader())
	if rs := resourceOn(lead, "r"); string(rs.Value) != "majority" {
		t.Fatalf("old leader after healing: r = %+v, want the majority's write", rs)
	}
	// The isolated leader's write never reached a majority: no replica
	// applied it (its entry was overwritten by the majority's log).
	for _, mb := range tc.members {
		if rs := resourceOn(mb, "iso"); rs.Version != 0 {
			t.Fatalf("%s applied the isolated leader's uncommitted write: %+v", mb.id, rs)
		}
	}
}

// A queued acquire on a leader that leaves office is answered at once with
// an unknown outcome (its client retries with the same request_id at the
// new leader, which re-attaches it), and the new leader's reaper withdraws
// it if nobody does.
func TestClusterWaiterOnDeposedLeader(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3, tweak: func(c *Config) { c.WaiterGrace = 200 * time.Millisecond }})
	lead := tc.leader()
	holder := mustApply(t, lead.node, acquire("q", time.Hour)).Lease
	errc := make(chan error, 1)
	go func() {
		_, err := lead.node.Apply(context.Background(), state.Command{Op: state.OpAcquire, Name: "q", Owner: "w", TTL: time.Hour, Wait: time.Hour, RequestID: "waiter-1"})
		errc <- err
	}()
	ctx := context.Background()
	deadline := time.Now().Add(clusterWait)
	for {
		li, err := lead.node.Lock(ctx, "q")
		if err != nil {
			t.Fatal(err)
		}
		if li.Waiters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the acquire never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := lead.node.TransferLeadership(ctx, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("queued acquire on a deposed leader: %v, want an unknown outcome", err)
		}
	case <-time.After(clusterWait):
		t.Fatal("the queued acquire on the deposed leader was not answered")
	}
	next := tc.leader()
	if next == lead {
		t.Fatal("leadership did not move")
	}
	// Nobody re-attached: the new leader withdraws it after the grace.
	for {
		li, err := next.node.Lock(ctx, "q")
		if err != nil {
			t.Fatal(err)
		}
		if li.Waiters == 0 {
			if li.Lease == nil || li.Lease.Token != holder.Token {
				t.Fatalf("lock q = %+v, want still held by token %d", li, holder.Token)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new leader never withdrew the orphaned waiter")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClusterConfigRefusals(t *testing.T) {
	m, err := raftstore.Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for name, cfg := range map[string]Config{
		"bootstrap without mux": {Bootstrap: true},
		"peers without mux":     {Peers: []Peer{{"fence-1", "127.0.0.1:1"}}},
		"bootstrap and peers":   {Mux: m, Bootstrap: true, Peers: []Peer{{"fence-1", m.Addr()}}},
		"peers without self":    {Mux: m, Peers: []Peer{{"a", "127.0.0.1:1"}}},
		"self at another addr":  {Mux: m, Peers: []Peer{{"fence-1", "127.0.0.1:1"}}},
		"duplicate peer":        {Mux: m, Peers: []Peer{{"fence-1", m.Addr()}, {"fence-1", "127.0.0.1:2"}}},
	} {
		cfg.DataDir = t.TempDir()
		if n, err := Open(cfg); !errors.Is(err, fence.ErrInvalid) {
			if n != nil {
				n.Close()
			}
			t.Errorf("%s: Open: %v, want an invalid-config error", name, err)
		}
	}
}

// fixedClock is a Clock whose stopwatch reads elapsed and whose wall
// reads wall, whatever the machine's clock does.
type fixedClock struct {
	wall    time.Time
	elapsed time.Duration
}

func (c fixedClock) Now() time.Time                { return c.wall }
func (c fixedClock) Since(time.Time) time.Duration { return c.elapsed }

// The leader clock reads the injected clock's stopwatch (Since) alone:
// its wall reading, an hour off, changes nothing of server time, and only
// the wall reading is reported.
func TestLeaderClockReadsTheInjectedStopwatch(t *testing.T) {
	c := newLeaderClock(1000, 0, 0, false)
	off := fixedClock{wall: time.Now().Add(time.Hour), elapsed: 7 * time.Second}
	c.clock, c.start = off, off.Now()
	if got := c.now(); got != 1000+int64(7*time.Second) {
		t.Fatalf("server time %v, want base + the stopwatch's 7s", time.Duration(got))
	}
	if w := wallNow(off); !w.Equal(off.wall.Round(0)) || w != w.Round(0) {
		t.Fatalf("wall reading %v, want the clock's wall %v without a monotonic part", w, off.wall)
	}
}

// linkProxies puts a cuttable TCP proxy on every directed link i→j.
type linkProxies struct {
	t     *testing.T
	mu    sync.Mutex
	links map[[2]int]*linkProxy
}

type linkProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	flowing *sync.Cond // signalled when cut or stalled changes
	cut     bool
	stalled bool // connections stay open but nothing is forwarded
	held    int  // reads not forwarded while stalled
	conns   map[net.Conn]bool
}

func newLinkProxies(t *testing.T) *linkProxies {
	lp := &linkProxies{t: t, links: map[[2]int]*linkProxy{}}
	t.Cleanup(func() {
		lp.mu.Lock()
		defer lp.mu.Unlock()
		for _, p := range lp.links {
			p.ln.Close()
			p.setCut(true)
		}
	})
	return lp
}

// add starts the proxy of link from→to (to's address target) and returns
// its address.
func (lp *linkProxies) add(from, to int, target string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		lp.t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.flowing = sync.NewCond(&p.mu)
	lp.mu.Lock()
	lp.links[[2]int{from, to}] = p
	lp.mu.Unlock()
	go p.serve()
	return ln.Addr().String()
}

func (p *linkProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *linkProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c); done <- struct{}{} }()
	go func() { p.copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// copy forwards src to dst, holding what it read while the link is
// stalled (a peer that stopped answering: its connections stay open).
func (p *linkProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.stalled && !p.cut {
				p.held++
			}
			for p.stalled && !p.cut {
				p.flowing.Wait()
			}
			p.mu.Unlock()
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// heldReads is how many reads the link holds back while stalled.
func (p *linkProxy) heldReads() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *linkProxy) setStalled(stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = stalled
	p.flowing.Broadcast()
}

func (p *linkProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	p.flowing.Broadcast()
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// isolate cuts every link to and from node i.
func (lp *linkProxies) isolate(i int) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	for k, p := range lp.links {
		if k[0] == i || k[1] == i {
			p.setCut(true)
		}
	}
}

func (lp *linkProxies) heal() {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	for _, p := range lp.links {
		p.setCut(false)
		p.setStalled(false)
	}
}

// link is the proxy of the directed link from→to.
func (lp *linkProxies) link(from, to int) *linkProxy {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.links[[2]int{from, to}]
}

// A leader that removes itself steps down once the change commits and
// stays a member of no configuration: it answers ErrNotLeader (raft keeps
// running under it: Config.ShutdownOnRemove is off), and the others elect
// a leader whose tokens continue upward.
func TestClusterRemovedLeaderStepsDown(t *testing.T) {
	t.Parallel() // mostly a watch of ten election timeouts on a cluster of its own
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	last := grant(t, lead.node, "a")
	ctx := context.Background()
	if err := lead.node.RemoveServer(ctx, lead.id); err != nil {
		t.Fatal(err)
	}
	next := tc.leaderAmong(tc.others(lead))
	if tok := grant(t, next.node, "b"); tok <= last {
		t.Fatalf("token %d not above %d", tok, last)
	}
	deadline := time.Now().Add(10 * lead.cfg.ElectionTimeout)
	for time.Now().Before(deadline) {
		if _, err := lead.node.Apply(ctx, acquire("removed", time.Hour)); !errors.Is(err, ErrNotLeader) || errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("removed ex-leader's Apply: %v, want ErrNotLeader", err)
		}
		if _, err := lead.node.Lock(ctx, "a"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("removed ex-leader's read: %v, want ErrNotLeader", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A clock left over from an earlier term (the leadership watcher has not
// closed it yet) serves nothing: no proposal, no read, not in office.
func TestStaleTermClockServesNothing(t *testing.T) {
	n := openNode(t, t.TempDir())
	mustApply(t, n, acquire("a", time.Hour))
	cur := n.clock.Load()
	stale := newLeaderClock(cur.base, 0, 0, false)
	stale.term = cur.term - 1
	n.clock.Store(stale)
	ctx := context.Background()
	groups := n.props.groups.Load()
	if _, err := n.Apply(ctx, acquire("b", time.Hour)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Apply with a stale-term clock: %v, want ErrNotLeader", err)
	}
	if _, err := n.proposeWith(ctx, stale, &state.Command{Op: state.OpAcquire, Name: "c", Owner: "x", TTL: time.Hour}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a group stamped with a stale-term clock: %v, want ErrNotLeader", err)
	}
	if n.props.groups.Load() != groups {
		t.Fatal("a stale-term clock proposed")
	}
	if _, err := n.Lock(ctx, "a"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("read with a stale-term clock: %v, want ErrNotLeader", err)
	}
	if _, err := n.Now(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Now with a stale-term clock: %v", err)
	}
	if n.IsLeader() || n.Ready() {
		t.Fatal("in office with a stale-term clock")
	}
	n.clock.Store(cur)
	mustApply(t, n, acquire("b", time.Hour))
}

// A node whose flags' rules differ from the rules recorded in the log says
// so while it does not lead; once it leads, its rules are proposed and the
// others, whose flags now differ, say so.
func TestClusterRulesMismatchWarns(t *testing.T) {
	logs := make([]*testutil.Buffer, 3)
	odd := state.DefaultConfig()
	odd.MaxTTL = 7 * time.Minute
	tc := startCluster(t, clusterOpts{n: 3, tweak: func(c *Config) {
		i := int(c.NodeID[1] - '1')
		logs[i] = &testutil.Buffer{}
		c.Logger = slog.New(slog.NewTextHandler(logs[i], nil))
		if c.NodeID == "n3" {
			c.Rules = odd
		}
	}})
	ctx := context.Background()
	lead := tc.leader()
	n3 := tc.members[2]
	if lead == n3 {
		tc.transferTo(tc.members[0])
		lead = tc.leader()
	}
	grant(t, lead.node, "a") // after the leader's rules
	tc.caughtUp(tc.members, lead)
	const warning = "the flags' rules differ from the rules recorded in the log"
	// Only what is logged from here on counts: n3 may have led first and
	// recorded its rules, which the others rightly warned about then.
	from := make([]int, 3)
	for i, l := range logs {
		from[i] = len(l.String())
	}
	since := func(mb *member) string {
		i := int(mb.id[1] - '1')
		return logs[i].String()[from[i]:]
	}
	waitLog := func(mb *member) {
		t.Helper()
		deadline := time.Now().Add(clusterWait)
		for !strings.Contains(since(mb), warning) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never warned about its rules; log:\n%s", mb.id, since(mb))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// n3 warns at once if its warning came before (it is logged once per
	// recorded value), so look at its whole log for this one.
	from[2] = 0
	waitLog(n3)
	for _, mb := range tc.members[:2] {
		if strings.Contains(since(mb), warning) {
			t.Fatalf("%s warned while its flags match the log", mb.id)
		}
	}
	tc.transferTo(n3)
	mustApply(t, n3.node, acquire("b", time.Minute)) // within n3's MaxTTL
	if got := n3.node.Rules(); got != odd {
		t.Fatalf("rules after n3 leads: %+v, want n3's", got)
	}
	// Under load an election may take leadership from n3 again, and a
	// leader with the default flags records them back: then n1 or n2 rightly
	// does not warn while it leads. Move leadership back to n3 (which
	// records its rules again at takeoffice) until both have warned as
	// followers.
	for _, mb := range tc.members[:2] {
		deadline := time.Now().Add(clusterWait)
		for !strings.Contains(since(mb), warning) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never warned about its rules; log:\n%s", mb.id, since(mb))
			}
			if !n3.node.IsLeader() {
				if next := tc.leader(); next != n3 {
					if err := next.node.TransferLeadership(ctx, "n3"); err != nil {
						t.Logf("moving leadership back to n3: %v", err)
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
