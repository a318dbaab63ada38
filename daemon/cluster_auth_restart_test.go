package daemon

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// A node that starts serves no call until it has caught up with what its
// cluster committed (cluster.Membership.CaughtUp; the gate itself is
// proven in server's TestNotCaughtUpServesNothingButStatus and the rule in
// cluster's TestCaughtUpAt). An outside test restarted a follower of a
// cluster that had turned authentication on while it was down and, in the
// window before it applied the enable, streamed a full backup from it as
// an anonymous admin. Here the follower restarts alone, with no leader to
// catch up from, its replica saying authentication is off: it serves
// nothing but its status view (not ready). Once its cluster is back and
// it has caught up, an anonymous backup is refused as unauthenticated and
// the admin's is served.
func TestClusterRestartedFollowerServesNothingUntilCaughtUp(t *testing.T) {
	t.Parallel()
	ids := []string{"n1", "n2", "n3"}
	peers, addrs := staticPeers(t, ids)
	cfgs := map[string]Config{}
	nodes := map[string]*runNode{}
	for _, id := range ids {
		cfgs[id] = clusterConfig(t, id, ClusterConfig{RaftAddr: addrs[id], Peers: peers})
		nodes[id] = startRun(t, cfgs[id])
	}
	var lead *runNode
	var fols []*runNode
	await(t, "a leader in office and two ready followers", func() bool {
		lead, fols = nil, nil
		for _, id := range ids {
			st := nodes[id].status(t)
			switch {
			case st.GetRole() == "leader" && st.GetReady():
				lead = nodes[id]
			case st.GetReady():
				fols = append(fols, nodes[id])
			}
		}
		return lead != nil && len(fols) == 2
	})
	ctx := context.Background()
	auth := fencev1connect.NewAuthServiceClient(clusterHTTP, lead.url)
	boot, err := auth.Bootstrap(ctx, connect.NewRequest(&fencev1.AuthBootstrapRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	admin := boot.Msg.GetSecret()

	// The follower goes down; the cluster turns checking on without it.
	f := fols[0]
	if err := f.stop(t); err != nil {
		t.Fatalf("%s: %v", f.id, err)
	}
	if _, err := auth.SetEnabled(ctx, withBearer(&fencev1.AuthSetEnabledRequest{Enabled: true}, admin)); err != nil {
		t.Fatal(err)
	}
	// Then the rest of the cluster goes down, and the follower starts
	// alone: what it holds says authentication is off.
	for _, n := range []*runNode{lead, fols[1]} {
		if err := n.stop(t); err != nil {
			t.Fatalf("%s: %v", n.id, err)
		}
	}
	f = startRun(t, cfgs[f.id])

	backup := func(secret string) error {
		s, err := fencev1connect.NewMaintenanceServiceClient(clusterHTTP, f.url).Backup(ctx, withBearer(&fencev1.BackupRequest{}, secret))
		if err != nil {
			return err
		}
		defer s.Close()
		for s.Receive() {
		}
		return s.Err()
	}
	if err := backup(""); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("an anonymous backup from a follower that has not caught up: %v, want unavailable", err)
	}
	if _, err := f.locks().Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: "x"})); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("an anonymous Get from a follower that has not caught up: %v, want unavailable", err)
	}
	// Its status view is served (an operator sees why it is not ready).
	st, err := f.client().NodeStatus(ctx, connect.NewRequest(&fencev1.NodeStatusRequest{}))
	if err != nil || st.Msg.GetReady() {
		t.Fatalf("status of a follower that has not caught up: %v, ready %t; want served, not ready", err, st.Msg.GetReady())
	}

	// Its membership view lists the configuration, and asks no other
	// member for its status (it would hand it to whom a stale replica
	// lets in).
	ms, err := f.client().Members(ctx, connect.NewRequest(&fencev1.MembersRequest{}))
	if err != nil {
		t.Fatalf("Members of a follower that has not caught up: %v, want served", err)
	}
	for _, m := range ms.Msg.GetMembers() {
		if m.GetId() != f.id && !strings.HasPrefix(m.GetError(), "not asked") {
			t.Fatalf("Members of a follower that has not caught up: %s listed %+v, want not asked", m.GetId(), m)
		}
	}

	// The cluster comes back; the follower catches up and judges calls
	// by the auth state it now holds.
	for _, id := range ids {
		if id != f.id {
			startRun(t, cfgs[id])
		}
	}
	await(t, "the restarted follower refuses an anonymous backup as unauthenticated", func() bool {
		return connect.CodeOf(backup("")) == connect.CodeUnauthenticated
	})
	if err := backup(admin); err != nil {
		t.Fatalf("the admin's backup from the caught-up follower: %v", err)
	}
}
