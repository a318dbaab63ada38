package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/testkit/testutil"
)

// AddMember refuses a node that leads a cluster of its own: raft would make
// it a voter here and overwrite its log, and the leases and writes it had
// acknowledged would be gone (the outside review's `fence members add` of a
// bootstrapped node exited 0 and wiped it). The refused node keeps serving
// its own state.
func TestClusterAddRefusesANodeOfAnotherCluster(t *testing.T) {
	t.Parallel() // a cluster of its own, mostly waiting on elections and joins
	a := startRun(t, clusterConfig(t, "a1", ClusterConfig{Bootstrap: true}))
	a.awaitReady(t)
	b := startRun(t, clusterConfig(t, "b1", ClusterConfig{Bootstrap: true}))
	b.awaitReady(t)
	ctx := context.Background()
	held, err := b.locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "b-lock", Owner: "b", Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.client().AddMember(ctx, connect.NewRequest(&fencev1.AddMemberRequest{Id: "b1", RaftAddr: b.cfg.Cluster.RaftAddr}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "belongs to another cluster") {
		t.Fatalf("AddMember of a node leading its own cluster: %v, want failed_precondition naming the other cluster", err)
	}
	if ms := a.members(t); len(ms) != 1 {
		t.Fatalf("a1's members after the refusal: %v", ids(ms))
	}
	got, err := b.locks().Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: "b-lock"}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Msg.GetLock().GetLease().GetToken() != held.Msg.GetLease().GetToken() {
		t.Fatalf("b1's lease after the refused add: %v, want token %d still held", got.Msg.GetLock(), held.Msg.GetLease().GetToken())
	}
}

// AddMember refuses a node of another cluster that knows no leader (the
// old nodes after a restore): the leader check above lets it by, its
// cluster id does not. b1 and b2 form a cluster (b1 applied its cluster
// id), b2 stops, b1 steps down; a1 adding b1 is refused naming both
// cluster ids, and a1 keeps committing (made a voter, b1 would hold a1 at
// a quorum of two that never commits again — the outside tester's run
// with `fence members add` after a restore).
func TestClusterAddRefusesALeaderlessNodeOfAnotherCluster(t *testing.T) {
	t.Parallel()
	a := startRun(t, clusterConfig(t, "a1", ClusterConfig{Bootstrap: true}))
	peers := []node.Peer{{ID: "b1", Addr: testutil.FreeAddr(t)}, {ID: "b2", Addr: testutil.FreeAddr(t)}}
	b1 := startRun(t, clusterConfig(t, "b1", ClusterConfig{RaftAddr: peers[0].Addr, Peers: peers}))
	b2 := startRun(t, clusterConfig(t, "b2", ClusterConfig{RaftAddr: peers[1].Addr, Peers: peers}))
	a.awaitReady(t)
	b1.awaitReady(t)
	await(t, "b1 applied its cluster's id", func() bool { return b1.status(t).GetClusterId() != "" })
	bID, aID := b1.status(t).GetClusterId(), a.status(t).GetClusterId()
	b2.stop(t)
	await(t, "b1 knows no leader", func() bool { return b1.status(t).GetLeaderId() == "" })

	ctx := context.Background()
	_, err := a.client().AddMember(ctx, connect.NewRequest(&fencev1.AddMemberRequest{Id: "b1", RaftAddr: b1.cfg.Cluster.RaftAddr}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "belongs to another cluster") ||
		!strings.Contains(err.Error(), bID) || !strings.Contains(err.Error(), aID) {
		t.Fatalf("AddMember of a leaderless node of cluster %s to %s: %v, want failed_precondition naming both", bID, aID, err)
	}
	if ms := a.members(t); len(ms) != 1 {
		t.Fatalf("a1's members after the refusal: %v", ids(ms))
	}
	if _, err := a.locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "after", Owner: "a", Ttl: durationpb.New(time.Minute)})); err != nil {
		t.Fatalf("a1 after the refusal: %v", err)
	}
}
