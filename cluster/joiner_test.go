package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

// checkJoinerState: a node is added only when it is empty or of this
// cluster. The old nodes after a restore know no leader (checkIsThere's
// leader check lets them by): made a voter, one of them held the restored
// cluster of one at a quorum of two that never committed again (outside
// review).
func TestCheckJoinerState(t *testing.T) {
	const ours, old = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	const leaderAddr = "127.0.0.1:7001" // the leader deciding
	for _, tc := range []struct {
		name     string
		st       NodeStatus
		ours     string
		ok       bool
		conflict func(*ConflictError) bool
		want     string // in the message
		retry    bool   // ErrUnavailable, not a refusal
	}{
		{name: "empty data dir waiting to be added", st: NodeStatus{ID: "n2"}, ours: ours, ok: true},
		{name: "a member of this cluster (removed, added back with its data)", st: NodeStatus{ID: "n2", ClusterID: ours, Term: 7, CommitIndex: 40, AppliedIndex: 40}, ours: ours, ok: true},
		{name: "a node of this cluster, its state applied, no leader", st: NodeStatus{ID: "n2", ClusterID: ours, Term: 9, AppliedIndex: 3}, ours: ours, ok: true},
		{name: "a node of the cluster a restore replaced, no leader", st: NodeStatus{ID: "n2", ClusterID: old, Term: 3, CommitIndex: 5, AppliedIndex: 5}, ours: ours,
			conflict: func(e *ConflictError) bool { return e.OtherCluster == old && e.ClusterID == ours }, want: "belongs to another cluster"},
		{name: "another cluster's node before anything was applied", st: NodeStatus{ID: "n2", ClusterID: old}, ours: ours,
			conflict: func(e *ConflictError) bool { return e.OtherCluster == old }, want: old},
		{name: "an old node restarted, nothing applied yet (a term only)", st: NodeStatus{ID: "n2", Term: 4}, ours: ours,
			conflict: func(e *ConflictError) bool { return e.NotEmpty && e.Term == 4 }, want: "belongs to another cluster or to none"},
		{name: "a removed member restarted empty, reached by this leader's last heartbeat (a term, this leader)", st: NodeStatus{ID: "n2", Term: 4, LeaderAddr: leaderAddr}, ours: ours, ok: true},
		{name: "an old node following another leader's address, nothing applied", st: NodeStatus{ID: "n2", Term: 4, LeaderAddr: "127.0.0.1:9"}, ours: ours,
			conflict: func(e *ConflictError) bool { return e.NotEmpty }},
		{name: "a node following this leader but holding entries and no cluster id", st: NodeStatus{ID: "n2", Term: 4, CommitIndex: 3, LeaderAddr: leaderAddr}, ours: ours,
			conflict: func(e *ConflictError) bool { return e.NotEmpty }},
		{name: "an old node, a commit index only", st: NodeStatus{ID: "n2", CommitIndex: 4}, ours: ours,
			conflict: func(e *ConflictError) bool { return e.NotEmpty }, want: "empty its data dir"},
		{name: "an old node, an applied index only", st: NodeStatus{ID: "n2", AppliedIndex: 4}, ours: ours,
			conflict: func(e *ConflictError) bool { return e.NotEmpty }},
		{name: "a leader not in office yet, a node with a cluster id", st: NodeStatus{ID: "n2", ClusterID: old, Term: 2}, ours: "", retry: true},
		{name: "a leader not in office yet, an empty node", st: NodeStatus{ID: "n2"}, ours: "", ok: true},
		{name: "a leader not in office yet, a node with state and no id", st: NodeStatus{ID: "n2", Term: 2}, ours: "",
			conflict: func(e *ConflictError) bool { return e.NotEmpty }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkJoinerState("n2", "127.0.0.1:7002", tc.st, tc.ours, leaderAddr)
			switch {
			case tc.ok:
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			case tc.retry:
				if !errors.Is(err, fence.ErrUnavailable) || errors.As(err, new(*ConflictError)) {
					t.Fatalf("got %v, want ErrUnavailable (retry)", err)
				}
			default:
				var ce *ConflictError
				if !errors.As(err, &ce) || !tc.conflict(ce) {
					t.Fatalf("got %#v (%v), want the ConflictError", err, err)
				}
				if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "127.0.0.1:7002") {
					t.Fatalf("message %q lacks %q or the address", err, tc.want)
				}
			}
		})
	}
}
