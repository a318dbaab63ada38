package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/cluster/clusterapi"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/testkit/testutil"
)

// clusterWait bounds every wait for a cluster to get somewhere (an
// election, a join, a transfer) in these tests: generous, since they run
// with -race on two cores; the tests never measure time.
const clusterWait = 30 * time.Second

// runNode is one server.Run of a cluster node, on real loopback sockets.
type runNode struct {
	id, url string
	cfg     Config
	logs    *testutil.Buffer
	cancel  context.CancelFunc
	done    chan error // Run's result
}

// clusterConfig is a node's config: a free client port and raft port.
func clusterConfig(t *testing.T, id string, cc ClusterConfig) Config {
	if cc.RaftAddr == "" {
		cc.RaftAddr = testutil.FreeAddr(t)
	}
	return Config{
		Listen: testutil.FreeAddr(t), DataDir: t.TempDir(), NodeID: id, Cluster: cc,
		LockTimeout: time.Second, ReadyTimeout: clusterWait, ShutdownTimeout: 5 * time.Second,
	}
}

// staticPeers gives each of ids a free raft address: the --peers list of
// a cluster that starts together, and the addresses by id.
func staticPeers(t *testing.T, ids []string) ([]node.Peer, map[string]string) {
	var peers []node.Peer
	addrs := map[string]string{}
	for _, id := range ids {
		addrs[id] = testutil.FreeAddr(t)
		peers = append(peers, node.Peer{ID: id, Addr: addrs[id]})
	}
	return peers, addrs
}

// startRun runs Run(cfg) until the test ends (or stop) and waits until it
// serves its client port.
func startRun(t *testing.T, cfg Config) *runNode {
	t.Helper()
	n := &runNode{id: cfg.NodeID, url: "http://" + cfg.Listen, cfg: cfg, logs: new(testutil.Buffer), done: make(chan error, 1)}
	cfg.Logger = slog.New(slog.NewTextHandler(n.logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- Run(ctx, cfg) }()
	t.Cleanup(func() { n.stop(t) })
	deadline := time.After(clusterWait)
	for !strings.Contains(n.logs.String(), "fence serving on "+n.url) {
		select {
		case err := <-n.done:
			n.done <- err
			if strings.Contains(n.logs.String(), "fence serving on "+n.url) {
				return n // served, then stopped (a refused join): the caller looks
			}
			t.Fatalf("%s: Run returned before serving: %v\n%s", n.id, err, n.logs.String())
		case <-deadline:
			t.Fatalf("%s: not serving after %s\n%s", n.id, clusterWait, n.logs.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return n
}

// stop cancels Run and returns its result (again on later calls), and
// drops the shared client's idle connections (a later run of the node on
// the same port must not be asked over one of this run's).
func (n *runNode) stop(t *testing.T) error {
	t.Helper()
	n.cancel()
	defer clusterHTTP.CloseIdleConnections()
	select {
	case err := <-n.done:
		n.done <- err
		return err
	case <-time.After(clusterWait):
		t.Fatalf("%s: Run did not return after its context ended\n%s", n.id, n.logs.String())
		return nil
	}
}

var clusterHTTP = &http.Client{}

func (n *runNode) client() fencev1connect.ClusterServiceClient {
	return fencev1connect.NewClusterServiceClient(clusterHTTP, n.url)
}

func (n *runNode) locks() fencev1connect.LockServiceClient {
	return fencev1connect.NewLockServiceClient(clusterHTTP, n.url)
}

func (n *runNode) status(t *testing.T) *fencev1.NodeStatusResponse {
	t.Helper()
	res, err := n.client().NodeStatus(context.Background(), connect.NewRequest(&fencev1.NodeStatusRequest{}))
	if connect.CodeOf(err) == connect.CodeUnavailable {
		// Not caught up with its cluster since it started
		// (cluster.Membership.CaughtUp): no call is served yet.
		return &fencev1.NodeStatusResponse{Id: n.id}
	}
	if err != nil {
		t.Fatalf("%s: NodeStatus: %v", n.id, err)
	}
	return res.Msg
}

// await polls cond until it holds, failing the test after clusterWait.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, clusterWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitReady waits until n is ready (a follower of a known leader that
// applied what it knew committed, or the leader in office).
//
// An error asking counts as not ready: the node's port may have served
// an earlier run of this node, whose closed keep-alive connection the
// shared client may still try once (a POST is not retried: "unexpected
// EOF" failed a CI run).
func (n *runNode) awaitReady(t *testing.T) {
	t.Helper()
	await(t, n.id+" ready", func() bool {
		res, err := n.client().NodeStatus(context.Background(), connect.NewRequest(&fencev1.NodeStatusRequest{}))
		return err == nil && res.Msg.GetReady()
	})
}

// members lists the members as n answers, sorted by id.
func (n *runNode) members(t *testing.T) []*fencev1.Member {
	t.Helper()
	res, err := n.client().Members(context.Background(), connect.NewRequest(&fencev1.MembersRequest{}))
	if err != nil {
		t.Fatalf("%s: Members: %v", n.id, err)
	}
	if res.Msg.GetAnsweredBy() != n.id {
		t.Errorf("Members answered by %q, want %q (the node asked)", res.Msg.GetAnsweredBy(), n.id)
	}
	ms := res.Msg.GetMembers()
	slices.SortFunc(ms, func(a, b *fencev1.Member) int { return strings.Compare(a.GetId(), b.GetId()) })
	return ms
}

func ids(ms []*fencev1.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.GetId())
	}
	return out
}

// A cluster formed with --bootstrap and --join (the third node joins
// through a follower, so its AddMember is forwarded to the leader); every
// node lists every member with the status that member reports; a
// transfer and a removal asked of a follower are done by the leader; a
// change marked as forwarded is not passed on by a node that does not lead.
func TestClusterJoinListTransferRemove(t *testing.T) {
	t.Parallel() // a cluster of its own, mostly waiting on elections and joins
	n1 := startRun(t, clusterConfig(t, "n1", ClusterConfig{Bootstrap: true}))
	n1.awaitReady(t)
	n2 := startRun(t, clusterConfig(t, "n2", ClusterConfig{Join: []string{n1.url}}))
	n2.awaitReady(t)
	n3 := startRun(t, clusterConfig(t, "n3", ClusterConfig{Join: []string{n2.url}})) // via a follower
	n3.awaitReady(t)
	// (It may be ready, added, a moment before the reply to its AddMember.)
	await(t, "n3 logs its join", func() bool { return strings.Contains(n3.logs.String(), "join: added as a voter") })

	nodes := []*runNode{n1, n2, n3}
	for _, n := range nodes {
		// Every member's status is asked of the member itself: wait until
		// each has heard of the latest configuration and its leader.
		await(t, n.id+" lists 3 ready voters", func() bool {
			ms := n.members(t)
			if !slices.Equal(ids(ms), []string{"n1", "n2", "n3"}) {
				return false
			}
			for _, m := range ms {
				if m.GetStatus() == nil || !m.GetStatus().GetReady() || m.GetStatus().GetLeaderId() != "n1" {
					return false
				}
			}
			return true
		})
		for i, m := range n.members(t) {
			want := nodes[i]
			st := m.GetStatus()
			if m.GetSuffrage() != cluster.Voter || m.GetRaftAddr() != want.cfg.Cluster.RaftAddr || st.GetId() != want.id || st.GetRaftAddr() != want.cfg.Cluster.RaftAddr {
				t.Errorf("%s lists %v, want voter %s at %s reporting itself", n.id, m, want.id, want.cfg.Cluster.RaftAddr)
			}
			if m.GetLeader() != (m.GetId() == "n1") || (st.GetRole() == "leader") != (m.GetId() == "n1") {
				t.Errorf("%s lists %s with leader=%v role=%q; n1 leads", n.id, m.GetId(), m.GetLeader(), st.GetRole())
			}
		}
	}

	// The API works on every node: a follower forwards to the leader over
	// the leader's raft port (cluster.Forwarder, served there by New).
	grant, err := n3.locks().Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{Name: "l", Owner: "o", Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		t.Fatalf("Acquire through follower n3: %v", err)
	}
	got, err := n1.locks().Get(context.Background(), connect.NewRequest(&fencev1.GetRequest{Name: "l"}))
	if err != nil || got.Msg.GetLock().GetLease().GetToken() != grant.Msg.GetLease().GetToken() {
		t.Fatalf("the leader's view of l: %v, %v; want the lease granted through n3 (token %d)", got, err, grant.Msg.GetLease().GetToken())
	}

	// A change another node forwarded (through the raft port) reaches a
	// follower: refused as unavailable, not passed on to the leader (one
	// hop at most).
	req := connect.NewRequest(&fencev1.RemoveMemberRequest{Id: "n3"})
	req.Header().Set(cluster.ForwardedHeader, "1")
	peer := fencev1connect.NewClusterServiceClient(clusterapi.PeerHTTPClient(raftstore.DialAPI), "http://"+n2.cfg.Cluster.RaftAddr)
	if _, err := peer.RemoveMember(context.Background(), req); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("forwarded RemoveMember on a follower: %v, want unavailable", err)
	}
	// The mark set by a client on the client port means nothing: the
	// follower forwards the call as any other.
	spoof := connect.NewRequest(&fencev1.AcquireRequest{Name: "spoofed", Owner: "o", Ttl: durationpb.New(time.Minute)})
	spoof.Header().Set(cluster.ForwardedHeader, "1")
	if g, err := n2.locks().Acquire(context.Background(), spoof); err != nil || g.Msg.GetLease().GetToken() == 0 {
		t.Fatalf("a client's forwarded mark on follower n2's client port: %v, want the acquire forwarded and granted", err)
	}
	if got := ids(n1.members(t)); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("after a refused forwarded removal the leader lists %v", got)
	}

	// Transfer asked of a follower (n3) to the other follower (n2).
	res, err := n3.client().TransferLeadership(context.Background(), connect.NewRequest(&fencev1.TransferLeadershipRequest{Id: "n2"}))
	if err != nil {
		t.Fatalf("TransferLeadership(n2) via n3: %v", err)
	}
	if res.Msg.GetLeader() != "n2" && res.Msg.GetLeader() != "" {
		t.Fatalf("TransferLeadership(n2) says the new leader is %q", res.Msg.GetLeader())
	}
	await(t, "n2 leads", func() bool { st := n2.status(t); return st.GetRole() == "leader" && st.GetReady() })
	// n3 forwards the next change to the leader it knows: wait until it
	// knows n2 (until then it answers unavailable, and a caller retries).
	await(t, "n3 follows n2", func() bool { return n3.status(t).GetLeaderId() == "n2" })

	// Removal asked of a follower (n3) of the old leader (n1).
	if _, err := n3.client().RemoveMember(context.Background(), connect.NewRequest(&fencev1.RemoveMemberRequest{Id: "n1"})); err != nil {
		t.Fatalf("RemoveMember(n1) via n3: %v", err)
	}
	for _, n := range []*runNode{n2, n3} {
		await(t, n.id+" lists n2, n3", func() bool { return slices.Equal(ids(n.members(t)), []string{"n2", "n3"}) })
	}
	// Adding a voter that is one already changes nothing and succeeds.
	if _, err := n3.client().AddMember(context.Background(), connect.NewRequest(&fencev1.AddMemberRequest{Id: "n3", RaftAddr: n3.cfg.Cluster.RaftAddr})); err != nil {
		t.Fatalf("AddMember of a member: %v", err)
	}
	if got := ids(n2.members(t)); !slices.Equal(got, []string{"n2", "n3"}) {
		t.Fatalf("after re-adding n3 the leader lists %v", got)
	}
	// A member's id at another address, or its address under another id,
	// is refused: raft would move the member.
	for _, req := range []*fencev1.AddMemberRequest{{Id: "n3", RaftAddr: n1.cfg.Cluster.RaftAddr}, {Id: "n9", RaftAddr: n3.cfg.Cluster.RaftAddr}} {
		_, err := n3.client().AddMember(context.Background(), connect.NewRequest(req))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "already") {
			t.Fatalf("AddMember(%v): %v, want failed_precondition (already a member / address)", req, err)
		}
	}
	ms := n2.members(t)
	if got := ids(ms); !slices.Equal(got, []string{"n2", "n3"}) || ms[1].GetRaftAddr() != n3.cfg.Cluster.RaftAddr {
		t.Fatalf("after refused conflicting adds the leader lists %v", ms)
	}
	// Under the new leader, through a follower again: a token above the
	// old leader's.
	_, err = n3.locks().Release(context.Background(), connect.NewRequest(&fencev1.ReleaseRequest{Name: "l", Token: grant.Msg.GetLease().GetToken()}))
	if err != nil {
		t.Fatalf("Release through n3: %v", err)
	}
	again, err := n3.locks().Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{Name: "l", Owner: "o", Ttl: durationpb.New(time.Minute)}))
	if err != nil || again.Msg.GetLease().GetToken() <= grant.Msg.GetLease().GetToken() {
		t.Fatalf("Acquire through n3 under n2: %v, %v; want a token above %d", again, err, grant.Msg.GetLease().GetToken())
	}
}

// A node started with --join before any node of the cluster runs keeps
// asking until it is added; a member that stops is listed as unreachable;
// restarted with its data dir it is a member already and asks nobody (its
// --join URL now leads nowhere, and its ReadyTimeout is short: asking
// would fail Run).
func TestClusterJoinWaitsAndRestartAsksNobody(t *testing.T) {
	cfg1 := clusterConfig(t, "n1", ClusterConfig{Bootstrap: true})
	cfg2 := clusterConfig(t, "n2", ClusterConfig{Join: []string{"http://" + cfg1.Listen}})
	n2 := startRun(t, cfg2)
	// n2 asks n1, which is not there yet, and says it will ask again.
	await(t, "n2 asks again", func() bool { return strings.Contains(n2.logs.String(), "join: not added yet; asking again") })
	n1 := startRun(t, cfg1)
	n1.awaitReady(t)
	n2.awaitReady(t)
	await(t, "n1 lists n1, n2", func() bool { return slices.Equal(ids(n1.members(t)), []string{"n1", "n2"}) })

	if err := n2.stop(t); err != nil {
		t.Fatalf("n2 stopped with %v", err)
	}
	ms := n1.members(t)
	if ms[1].GetStatus() != nil || !strings.HasPrefix(ms[1].GetError(), "unreachable: ") || ms[1].GetRaftAddr() != cfg2.Cluster.RaftAddr {
		t.Fatalf("a stopped member is listed as %v, want it unreachable at its raft address", ms[1])
	}

	cfg2.Cluster.Join = []string{"http://" + testutil.FreeAddr(t)} // nobody there
	cfg2.ReadyTimeout = time.Second
	n2 = startRun(t, cfg2)
	n2.awaitReady(t)
	// Its join decides before it asks anybody: it says it is a member
	// already and asks nobody (asking the URL where nobody answers would
	// fail Run after ReadyTimeout).
	await(t, "the restarted member says it is one", func() bool {
		return strings.Contains(n2.logs.String(), "join: already a member (raft state in the data dir); not asking")
	})
	if logs := n2.logs.String(); strings.Contains(logs, "join: not added yet") || strings.Contains(logs, "join: added as a voter") {
		t.Fatalf("restarted member asked to join:\n%s", logs)
	}
	select {
	case err := <-n2.done:
		t.Fatalf("restarted member's Run returned %v\n%s", err, n2.logs.String())
	default:
	}
}

// A join nobody answers fails Run after ReadyTimeout, with the URL asked
// in the error.
func TestClusterJoinGivesUp(t *testing.T) {
	nowhere := "http://" + testutil.FreeAddr(t)
	cfg := clusterConfig(t, "n1", ClusterConfig{Join: []string{nowhere}})
	cfg.ReadyTimeout = time.Second
	n := startRun(t, cfg)
	select {
	case err := <-n.done:
		n.done <- err
		if err == nil || !strings.Contains(err.Error(), "join") || !strings.Contains(err.Error(), nowhere) {
			t.Fatalf("Run returned %v, want a join error naming %s", err, nowhere)
		}
	case <-time.After(clusterWait):
		t.Fatalf("Run still running %s after a join nobody answers (ReadyTimeout %s)", clusterWait, cfg.ReadyTimeout)
	}
}

// A single node (no raft address) is a cluster of one: it lists itself,
// leading, and refuses changes with FailedPrecondition after validating
// them (a bad field is InvalidArgument naming it).
func TestClusterSingleNode(t *testing.T) {
	_, url := startServer(t)
	c := fencev1connect.NewClusterServiceClient(clusterHTTP, url)
	ctx := context.Background()
	res, err := c.Members(ctx, connect.NewRequest(&fencev1.MembersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	ms := res.Msg.GetMembers()
	if len(ms) != 1 || !ms[0].GetLeader() || ms[0].GetSuffrage() != cluster.Voter || ms[0].GetStatus().GetRole() != "leader" || !ms[0].GetStatus().GetReady() || ms[0].GetRaftAddr() != "" {
		t.Fatalf("single node lists %v, want itself, a ready leading voter without a raft address", ms)
	}
	_, err = c.AddMember(ctx, connect.NewRequest(&fencev1.AddMemberRequest{Id: "n2", RaftAddr: "127.0.0.1:1"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "alone") {
		t.Fatalf("AddMember on a single node: %v, want failed_precondition (runs alone)", err)
	}
	if _, err := c.TransferLeadership(ctx, connect.NewRequest(&fencev1.TransferLeadershipRequest{})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("TransferLeadership on a single node: %v, want failed_precondition", err)
	}
	_, err = c.AddMember(ctx, connect.NewRequest(&fencev1.AddMemberRequest{Id: "n2", RaftAddr: "0.0.0.0:7000"}))
	checkInvalid(t, err, "raft_addr")
	_, err = c.RemoveMember(ctx, connect.NewRequest(&fencev1.RemoveMemberRequest{Id: ""}))
	checkInvalid(t, err, "id")
}

// AddMember's checks: a second node started with an id that is a member
// already (the default fence-1, say) is refused at once, its join must not
// move the member; an address where no node answers is refused as
// unavailable (a voter nobody reaches would count toward every quorum: with
// one voter, the cluster could never commit again); an address where
// another node answers is refused; a running node that waits to be added
// (no --bootstrap, --join or --peers) is added.
func TestClusterAddChecks(t *testing.T) {
	t.Parallel() // a cluster of its own, mostly waiting on elections and joins
	n1 := startRun(t, clusterConfig(t, "n1", ClusterConfig{Bootstrap: true}))
	n1.awaitReady(t)
	dup := startRun(t, clusterConfig(t, "n1", ClusterConfig{Join: []string{n1.url}})) // ReadyTimeout: clusterWait
	select {
	case err := <-dup.done:
		dup.done <- err
		if err == nil || !strings.Contains(err.Error(), "already a member") {
			t.Fatalf("duplicate id's Run returned %v, want a refused join", err)
		}
	case <-time.After(clusterWait):
		t.Fatalf("duplicate id's Run still running after %s", clusterWait)
	}

	if _, err := n1.client().RemoveMember(context.Background(), connect.NewRequest(&fencev1.RemoveMemberRequest{Id: "n1"})); connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "last voter") {
		t.Fatalf("removing the last voter: %v, want failed_precondition", err)
	}
	add := func(id, addr string) error {
		_, err := n1.client().AddMember(context.Background(), connect.NewRequest(&fencev1.AddMemberRequest{Id: id, RaftAddr: addr}))
		return err
	}
	nowhere := testutil.FreeAddr(t)
	if err := add("n2", nowhere); connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "no node answers at "+nowhere) {
		t.Fatalf("AddMember at an address nobody answers: %v, want unavailable", err)
	}
	n2 := startRun(t, clusterConfig(t, "n2", ClusterConfig{})) // waits to be added
	if err := add("n9", n2.cfg.Cluster.RaftAddr); connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "is n2, not n9") {
		t.Fatalf("AddMember(n9) at n2's address: %v, want failed_precondition", err)
	}
	ms := n1.members(t)
	if len(ms) != 1 || ms[0].GetRaftAddr() != n1.cfg.Cluster.RaftAddr || !n1.status(t).GetReady() {
		t.Fatalf("after the refused adds n1 lists %v", ms)
	}
	addFresh := func(joinID string) error {
		_, err := n1.client().AddMember(context.Background(), connect.NewRequest(&fencev1.AddMemberRequest{Id: "n2", RaftAddr: n2.cfg.Cluster.RaftAddr, Fresh: true, JoinId: joinID}))
		return err
	}
	if err := addFresh("j1"); err != nil {
		t.Fatalf("AddMember(n2) of a waiting node: %v", err)
	}
	n2.awaitReady(t)
	// n2's WatchFresh returns once it has found n2 in the configuration
	// (after logging the lost-voter error if nobody added it): its
	// goroutine gone, it has looked.
	await(t, "n2's WatchFresh has looked", func() bool { return !goroutineIn("cluster.(*Membership).WatchFresh") })
	if strings.Contains(n2.logs.String(), "nobody added it") {
		t.Errorf("n2, added while it waited, logs the lost-voter error:\n%s", n2.logs.String())
	}
	// A fresh join's retry (same join id: its reply was lost) is that
	// join; another fresh join under a member's id is an empty data dir
	// taking the member's place.
	if err := addFresh("j1"); err != nil {
		t.Fatalf("retry of the fresh join: %v", err)
	}
	if err := addFresh("j2"); connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "empty data dir") {
		t.Fatalf("another fresh join as member n2: %v, want failed_precondition", err)
	}
	if got := ids(n1.members(t)); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("after adding n2, n1 lists %v", got)
	}
	// Another node on a member's address is not taken for the member.
	n2.stop(t)
	cfg7 := clusterConfig(t, "n7", ClusterConfig{RaftAddr: n2.cfg.Cluster.RaftAddr})
	startRun(t, cfg7)
	ms = n1.members(t)
	if ms[1].GetId() != "n2" || ms[1].GetStatus() != nil || !strings.Contains(ms[1].GetError(), "wrong node: the node at "+cfg7.Cluster.RaftAddr+" is n7") {
		t.Fatalf("with n7 on n2's address, n1 lists %v", ms[1])
	}
}

// goroutineIn reports whether some goroutine of this process is in fn
// (a function's name as a stack trace prints it, e.g.
// "cluster.(*Membership).WatchFresh").
func goroutineIn(fn string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), fn+"(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
