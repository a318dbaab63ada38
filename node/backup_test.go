package node

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// viewState loads a backup point's view into a machine.
func viewState(t *testing.T, p BackupPoint) *state.Machine {
	t.Helper()
	var b bytes.Buffer
	if _, err := p.View.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	m := state.New()
	if err := m.Restore(&b); err != nil {
		t.Fatal(err)
	}
	return m
}

// A follower backs up what it has applied once caught up with what it
// knows committed: the point names it and its role, and its facts are the
// state's. The leader's point is the same state when nothing happened
// between them.
func TestBackupViewOnFollowerAndLeader(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	for i := range 5 {
		grant(t, lead.node, "x"+string(rune('a'+i)))
	}
	tc.caughtUp(tc.members, lead)
	ctx := context.Background()
	lp, err := lead.node.BackupView(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lp.Role != "leader" || lp.NodeID != lead.id || lp.LastToken != 5 || lp.ClusterID == "" || lp.Applied == 0 || lp.Term == 0 || lp.WallUnixMS == 0 {
		t.Fatalf("leader's point: %+v", lp)
	}
	for _, mb := range tc.others(lead) {
		p, err := mb.node.BackupView(ctx)
		if err != nil {
			t.Fatalf("%s: %v", mb.id, err)
		}
		m := viewState(t, p)
		if p.Role != "follower" || p.NodeID != mb.id || p.LastToken != 5 || m.LastToken() != 5 || p.ClusterID != lp.ClusterID ||
			m.ClusterID() != lp.ClusterID || p.ServerTime != m.Now() || p.Applied == 0 {
			t.Fatalf("%s's point: %+v; state counter %d, cluster id %q, server time %d", mb.id, p, m.LastToken(), m.ClusterID(), m.Now())
		}
	}
}

// A closed node backs nothing up.
func TestBackupViewAfterClose(t *testing.T) {
	n := openNode(t, t.TempDir())
	n.Close()
	if _, err := n.BackupView(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("BackupView after Close: %v, want ErrClosed", err)
	}
}

// A node that knows no leader (its peers are gone: it stands for
// election) refuses to back up: it may be behind what was committed.
func TestBackupViewRefusedWithoutALeader(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	grant(t, lead.node, "x")
	tc.caughtUp(tc.members, lead)
	others := tc.others(lead)
	tc.kill(lead)
	tc.kill(others[0])
	left := others[1].node
	deadline := time.Now().Add(time.Minute) // a hang guard
	for {
		if id, _ := left.Leader(); id == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the last node still knows a leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := left.BackupView(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("BackupView on a node that knows no leader: %v, want ErrNotLeader", err)
	}
}
