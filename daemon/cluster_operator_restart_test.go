package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// A follower restarted on its data replays its log once its leader tells
// it what is committed. An outside test saw every replayed event in its
// story and Activity ring stamped with the replay's wall time (a false
// spike of grants). What happened before the node started is not fed to
// its operator view (node.OnChanges skips its own log tail, the server
// what it applies before it caught up): the restarted follower's story of
// a lock granted before is empty and its Activity counts no grant, while
// a grant after its start is in both.
func TestClusterRestartedFollowerStoryHasNoReplayedEvents(t *testing.T) {
	t.Parallel()
	c := startReadyCluster(t)
	cfgs, lead, f := c.cfgs, c.lead, c.follower
	ctx := context.Background()
	acquire := func(name string) int64 {
		t.Helper()
		a, err := lead.locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "w", Ttl: durationpb.New(time.Minute)}))
		if err != nil {
			t.Fatal(err)
		}
		return int64(a.Msg.GetLease().GetToken())
	}
	story := func(n *runNode, name string) []*fencev1.StoryEvent {
		t.Helper()
		res, err := fencev1connect.NewOperatorServiceClient(clusterHTTP, n.url).LockStory(ctx, connect.NewRequest(&fencev1.LockStoryRequest{Name: name}))
		if err != nil {
			t.Fatalf("%s: LockStory: %v", n.id, err)
		}
		return res.Msg.GetEvents()
	}
	grants := func(n *runNode) uint32 {
		t.Helper()
		res, err := fencev1connect.NewOperatorServiceClient(clusterHTTP, n.url).Activity(ctx, connect.NewRequest(&fencev1.ActivityRequest{}))
		if err != nil {
			t.Fatalf("%s: Activity: %v", n.id, err)
		}
		var sum uint32
		for _, p := range res.Msg.GetPoints() {
			sum += p.GetGrants()
		}
		return sum
	}
	acquire("before")
	await(t, "the follower's story holds the grant", func() bool { return len(story(f, "before")) == 1 })

	if err := f.stop(t); err != nil {
		t.Fatalf("%s: %v", f.id, err)
	}
	// Committed while the follower is down: it learns these in its
	// catch-up burst, which raft may hand its FSM as one batch after the
	// node already counts as caught up (raft's applied index runs ahead).
	for i := range 20 {
		acquire(fmt.Sprintf("while-down/%d", i))
	}
	f = startRun(t, cfgs[f.id])
	await(t, "the restarted follower ready", func() bool { return f.status(t).GetReady() })
	tok := acquire("after")
	await(t, "the restarted follower's story holds the grant made after its start", func() bool { return len(story(f, "after")) == 1 })
	if ev := story(f, "after")[0]; ev.GetKind() != "grant" || int64(ev.GetToken()) != tok {
		t.Fatalf("the restarted follower's story of the lock granted after its start: %v; want the grant of token %d", ev, tok)
	}
	if evs := story(f, "before"); len(evs) != 0 {
		t.Fatalf("the restarted follower's story of a lock granted before its start: %v; want none (a replay, stamped with the replay's time)", evs)
	}
	for i := range 20 {
		if evs := story(f, fmt.Sprintf("while-down/%d", i)); len(evs) != 0 {
			t.Fatalf("the restarted follower's story of a lock granted while it was down: %v; want none (learned late, stamped with the catch-up's time)", evs)
		}
	}
	if g := grants(f); g != 1 {
		t.Fatalf("the restarted follower's Activity counts %d grants; want 1 (the one after its start, none replayed)", g)
	}
}
