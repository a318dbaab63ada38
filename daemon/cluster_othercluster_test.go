package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
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
