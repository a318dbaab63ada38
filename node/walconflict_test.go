package node

import (
	"context"
	"testing"

	"github.com/fenceworks/fence/state"
)

// A leader cut off from the others appends an entry it cannot commit; the
// majority elects another leader and writes past it. When the old leader
// hears from the new one, raft deletes its conflicting suffix and stores
// the new leader's entries in its place. It must then restart from its data
// dir like any node: raft-wal v0.4.0 sealed the tail segment without its
// index block on that truncation, and the node failed at every start after
// ("sealed segment has no index block", hashicorp/raft-wal#31; the 3-node
// chaos run found it). raftstore's TestWALSuffixTruncationSurvivesReopen is
// the same at the store level.
func TestClusterConflictingSuffixSurvivesRestart(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc := startCluster(t, clusterOpts{n: 3, links: true})
	lead := tc.leader()
	if lead.node.store.Kind != LogStoreWAL {
		t.Fatalf("log store %q, want the WAL", lead.node.store.Kind)
	}
	last := grant(t, lead.node, "a")
	idx := map[*member]int{}
	for i, mb := range tc.members {
		idx[mb] = i
	}
	before, err := lead.node.log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	tc.proxies.isolate(idx[lead])

	ctx := context.Background()
	_, err = lead.node.Apply(ctx, state.Command{Op: state.OpWrite, Name: "iso", Token: last, Value: []byte("lost"), OpID: "iso"})
	if err == nil {
		t.Fatal("an isolated leader acknowledged a write")
	}
	if after, _ := lead.node.log.LastIndex(); after <= before {
		t.Skipf("the isolated leader appended nothing (%v): no suffix to conflict", err)
	}
	next := tc.leaderAmong(tc.others(lead))
	tok := grant(t, next.node, "b")
	write(t, next.node, "r", tok, "majority", "maj")
	tc.proxies.heal()
	tc.caughtUp(tc.members, tc.leader())
	if rs := resourceOn(lead, "r"); string(rs.Value) != "majority" {
		t.Fatalf("old leader after healing: r = %+v, want the majority's write", rs)
	}

	// Restart the old leader from its data dir (its suffix was replaced).
	tc.kill(lead)
	tc.open(lead)
	cur := tc.leader()
	write(t, cur.node, "r", grant(t, cur.node, "c"), "after", "after")
	tc.caughtUp(tc.members, cur)
	if rs := resourceOn(lead, "r"); string(rs.Value) != "after" {
		t.Fatalf("old leader after its restart: r = %+v, want the latest write", rs)
	}
	if rs := resourceOn(lead, "iso"); rs.Version != 0 {
		t.Fatalf("old leader applied its uncommitted write: %+v", rs)
	}
}
