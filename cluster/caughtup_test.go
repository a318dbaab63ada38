package cluster

import (
	"testing"

	"github.com/fenceworks/fence/node"
)

// When a node counts as caught up with its cluster since its start. The
// case that matters: a restarted follower with a short log has applied
// everything raft told it is committed (min(leader's commit, its last
// entry)) long before it has what the leader committed; only the leader's
// own commit index, asked for, says when it has.
func TestCaughtUpAt(t *testing.T) {
	for _, c := range []struct {
		name   string
		st     node.Status
		single bool
		target uint64
		want   bool
	}{
		{"leader in office, all applied", node.Status{Leader: true, InOffice: true, CommitIndex: 9, AppliedIndex: 9}, false, 0, true},
		{"leader not yet in office", node.Status{Leader: true, CommitIndex: 9, AppliedIndex: 9}, false, 0, false},
		{"leader in office, applying what it committed since (under load)", node.Status{Leader: true, InOffice: true, CommitIndex: 9, AppliedIndex: 8}, false, 0, true},
		{"single node, no leader yet", node.Status{CommitIndex: 9, AppliedIndex: 9}, true, 0, false},
		{"single node leading", node.Status{Leader: true, InOffice: true, CommitIndex: 9, AppliedIndex: 9}, true, 0, true},
		{"follower, leader's commit not known", node.Status{CommitIndex: 5, AppliedIndex: 5}, false, 0, false},
		{"follower at its own commit, behind the leader's", node.Status{CommitIndex: 5, AppliedIndex: 5}, false, 9, false},
		{"follower at the leader's commit", node.Status{CommitIndex: 9, AppliedIndex: 9}, false, 9, true},
		{"follower past it", node.Status{CommitIndex: 12, AppliedIndex: 11}, false, 9, true},
	} {
		if got := caughtUpAt(c.st, c.single, c.target); got != c.want {
			t.Errorf("%s: caught up %t, want %t", c.name, got, c.want)
		}
	}
}
