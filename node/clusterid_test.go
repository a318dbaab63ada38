package node

import (
	"testing"
)

// The first leader records a cluster id (a UUID) before it serves; a
// restart keeps it and proposes no other; the nodes of a cluster share it.
func TestClusterIDChosenByTheFirstLeader(t *testing.T) {
	t.Parallel() // a cluster of its own
	dir := t.TempDir()
	n := openNode(t, dir)
	id := n.ClusterID()
	if len(id) != 36 || id[14] != '4' {
		t.Fatalf("cluster id %q after Open, want a UUID v4", id)
	}
	n.Close()
	n2 := openNode(t, dir)
	if got := n2.ClusterID(); got != id {
		t.Fatalf("after a restart: cluster id %q, want %q", got, id)
	}
	other := openNode(t, t.TempDir())
	if other.ClusterID() == id {
		t.Fatalf("two stores share cluster id %q", id)
	}

	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	grant(t, lead.node, "x")
	tc.caughtUp(tc.members, lead)
	cid := lead.node.ClusterID()
	for _, mb := range tc.members {
		if got := mb.node.ClusterID(); got == "" || got != cid {
			t.Fatalf("node %s: cluster id %q, leader's %q", mb.id, got, cid)
		}
	}
}
