package server

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Review (issue 9): a voter whose data dir was lost must not come back
// under its old id as if nothing happened. raft's safety rests on a voter
// remembering its log and its vote; an empty one votes for a candidate
// that lacks committed entries (tokens handed out again: G1, G6) and may
// vote twice in one term. operations.md says "remove it, then add the new
// one", but --join does not enforce it: the leader's checkNoConflict finds
// the id already a member at that address, skips checkIsThere and raft's
// AddVoter is a no-op, so the join "succeeds" and the empty node serves as
// the old voter. Want: the join refused (Run fails naming the id) until
// the member is removed.
func TestClusterWipedVoterRejoinRefused(t *testing.T) {
	cfg1 := clusterConfig(t, "n1", ClusterConfig{Bootstrap: true})
	n1 := startRun(t, cfg1)
	n1.awaitReady(t)
	cfg2 := clusterConfig(t, "n2", ClusterConfig{Join: []string{"http://" + cfg1.Listen}})
	n2 := startRun(t, cfg2)
	n2.awaitReady(t)
	await(t, "n1 lists n1, n2", func() bool { return slices.Equal(ids(n1.members(t)), []string{"n1", "n2"}) })
	if err := n2.stop(t); err != nil {
		t.Fatalf("n2 stopped with %v", err)
	}

	cfg2.DataDir = t.TempDir() // the disk is lost; same id, same addresses
	cfg2.ReadyTimeout = 5 * time.Second
	n2 = startRun(t, cfg2)
	select {
	case err := <-n2.done:
		n2.done <- err
		if err == nil || !strings.Contains(err.Error(), "n2") {
			t.Fatalf("wiped n2's join ended with %v, want a refusal naming n2\n%s", err, n2.logs.String())
		}
	case <-time.After(3 * cfg2.ReadyTimeout):
		t.Fatalf("an empty data dir rejoined as voter n2 without a removal (join accepted):\n%s", n2.logs.String())
	}
}
