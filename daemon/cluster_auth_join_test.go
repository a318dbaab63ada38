package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// With authentication on, an empty node started with --join is not added
// as a voter unless it carries an admin token (FENCE_AUTH_TOKEN for fence
// serve): the join without one is refused and the node never becomes a
// member; with the token it joins.
func TestClusterAuthJoinNeedsAnAdminToken(t *testing.T) {
	t.Parallel()
	n1 := startRun(t, clusterConfig(t, "n1", ClusterConfig{Bootstrap: true}))
	n1.awaitReady(t)
	ctx := context.Background()
	auth := fencev1connect.NewAuthServiceClient(clusterHTTP, n1.url)
	boot, err := auth.Bootstrap(ctx, connect.NewRequest(&fencev1.AuthBootstrapRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	admin := boot.Msg.GetSecret()
	if _, err := auth.SetEnabled(ctx, withBearer(&fencev1.AuthSetEnabledRequest{Enabled: true}, admin)); err != nil {
		t.Fatal(err)
	}
	cfg := clusterConfig(t, "n2", ClusterConfig{Join: []string{n1.url}})
	cfg.ReadyTimeout = time.Second // how long it keeps asking; the test measures nothing
	intruder := startRun(t, cfg)
	var joinErr error
	select {
	case joinErr = <-intruder.done:
		intruder.done <- joinErr
		if joinErr == nil {
			t.Fatal("a join without a token succeeded")
		}
	case <-time.After(clusterWait):
		t.Fatalf("the join without a token still runs after %s", clusterWait)
	}
	members := func() []*fencev1.Member {
		res, err := n1.client().Members(ctx, withBearer(&fencev1.MembersRequest{}, admin))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetMembers()
	}
	if ms := members(); len(ms) != 1 {
		t.Fatalf("members after a join without a token: %v", ids(ms))
	}
	if !strings.Contains(joinErr.Error(), "unauthenticated") {
		t.Errorf("the refused join does not say why: %v", joinErr)
	}
	cfg = clusterConfig(t, "n3", ClusterConfig{Join: []string{n1.url}, JoinAuthToken: admin})
	n3 := startRun(t, cfg)
	await(t, "n3 joined", func() bool { return len(members()) == 2 })
	if !strings.Contains(n3.logs.String(), "join: added as a voter") {
		t.Logf("n3:\n%s", n3.logs.String())
	}
}
