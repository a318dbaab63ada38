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

// A follower answers ListSessions itself, at its estimate of server time
// (node.Node.ReadStateAt: the state's time plus the time since it last
// applied a change): on an idle cluster a session's sinceKeepaliveMs grows
// there too (read at the state's time, it stood still).
func TestClusterFollowerListSessionsTimesMoveWhileIdle(t *testing.T) {
	t.Parallel()
	c := startReadyCluster(t)
	lead, f := c.lead, c.follower
	ctx := context.Background()
	o, err := fencev1connect.NewSessionServiceClient(clusterHTTP, lead.url).Open(ctx, connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(120 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	id := o.Msg.GetSession().GetId()
	since := func() (int64, bool) {
		res, err := fencev1connect.NewOperatorServiceClient(clusterHTTP, f.url).ListSessions(ctx, connect.NewRequest(&fencev1.ListSessionsRequest{}))
		if err != nil {
			t.Fatalf("%s: ListSessions: %v", f.id, err)
		}
		for _, s := range res.Msg.GetSessions() {
			if s.GetSessionId() == id {
				return s.GetSinceKeepaliveMs(), true
			}
		}
		return 0, false
	}
	var first int64
	await(t, "the follower lists the session", func() bool {
		var ok bool
		first, ok = since()
		return ok
	})
	// Nothing is committed from here on.
	await(t, "the follower's sinceKeepaliveMs grows while the cluster is idle", func() bool {
		s, _ := since()
		return s > first
	})
}
