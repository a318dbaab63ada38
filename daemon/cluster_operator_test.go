package daemon

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// The operator view of a three-node cluster: a follower's story of a lock
// granted through the leader holds the grant at the same log index as the
// leader's (each node keeps its own, fed by what it applies); once a
// member is stopped, ClusterOverview on the leader answers with it
// unhealthy and its error, the others healthy.
func TestClusterOperatorViewStoriesOnEveryMemberAndAStoppedMemberUnhealthy(t *testing.T) {
	c := startReadyCluster(t)
	lead, follower := c.lead, c.follower
	ctx := context.Background()
	a, err := lead.locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "story", Owner: "w", Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		t.Fatal(err)
	}
	story := func(n *runNode) []*fencev1.StoryEvent {
		res, err := fencev1connect.NewOperatorServiceClient(clusterHTTP, n.url).LockStory(ctx, connect.NewRequest(&fencev1.LockStoryRequest{Name: "story"}))
		if err != nil {
			t.Fatalf("%s: LockStory: %v", n.id, err)
		}
		return res.Msg.GetEvents()
	}
	leadEvents := story(lead)
	if len(leadEvents) != 1 || leadEvents[0].GetKind() != "grant" || leadEvents[0].GetToken() != a.Msg.GetLease().GetToken() {
		t.Fatalf("the leader's story: %v; want the grant of token %d", leadEvents, a.Msg.GetLease().GetToken())
	}
	await(t, "the follower's story holds the grant", func() bool { return len(story(follower)) == 1 })
	if fe := story(follower)[0]; fe.GetKind() != "grant" || fe.GetToken() != leadEvents[0].GetToken() || fe.GetLogIndex() != leadEvents[0].GetLogIndex() {
		t.Fatalf("the follower's story %v, the leader's %v: want the same grant at the same log index", fe, leadEvents[0])
	}

	if err := follower.stop(t); err != nil {
		t.Fatalf("stopping %s: %v", follower.id, err)
	}
	ov, err := fencev1connect.NewOperatorServiceClient(clusterHTTP, lead.url).ClusterOverview(ctx, connect.NewRequest(&fencev1.ClusterOverviewRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Msg.GetMembers()) != 3 {
		t.Fatalf("%d members: %v", len(ov.Msg.GetMembers()), ov.Msg)
	}
	for _, m := range ov.Msg.GetMembers() {
		switch {
		case m.GetId() == follower.id && (m.GetHealthy() || m.GetError() == ""):
			t.Errorf("the stopped member %s: %v; want healthy false with its error", m.GetId(), m)
		case m.GetId() != follower.id && (!m.GetHealthy() || m.GetError() != "" || m.GetAppliedIndex() == 0):
			t.Errorf("member %s: %v; want healthy with its applied index", m.GetId(), m)
		case m.GetId() == lead.id && (!m.GetLeader() || m.GetRole() != "leader"):
			t.Errorf("the leader %s: %v", m.GetId(), m)
		}
	}
}
