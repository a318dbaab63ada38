package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
)

// Caught up since start. A node that starts (a restart, or a new member)
// holds the state of its last snapshot and of the entries it has applied;
// what its cluster committed since — an `auth enable`, a revoked token,
// the bootstrap itself — arrives as its leader replicates it. Until then
// its replica may not know that authentication is on, and a call judged
// against it would be served as an anonymous admin's (an outside test read
// full backups from a follower's client port in that window). So the
// server serves no API call on a node until it has caught up once
// (server: identify refuses UNAVAILABLE, and the client asks another node
// or retries): a leader in office (its barrier applied everything committed before its term),
// or a follower that has applied at least the commit index its leader
// reported when first asked after the start. From then on it is caught up
// for good: later changes reach it in log order, like any command.
//
// A follower cannot tell the leader's commit index from its own: raft
// gives it min(leader's commit, its last entry), which a follower with a
// short log reaches long before it has what the leader committed. So it
// asks the leader (its NodeStatus over the peer port, as Members does).

// caughtUp is Membership's record of it.
type caughtUp struct {
	done   atomic.Bool
	target atomic.Uint64 // the leader's commit index when asked; 0 not known yet
	asking atomic.Bool   // one question to the leader at a time
	asked  atomic.Int64  // when the last one started (unix nanos), to pace them
}

// askEvery paces the questions to the leader while a follower is not
// caught up (each call of CaughtUp may start one).
const askEvery = 100 * time.Millisecond

// CaughtUp reports whether this node has caught up with its cluster since
// it started (see above). It is cheap once true; before, it may start one
// question to the leader in the background.
func (m *Membership) CaughtUp() bool {
	c := &m.caught
	if c.done.Load() {
		return true
	}
	st := m.node.Status()
	target := c.target.Load()
	if caughtUpAt(st, m.single(), target) {
		c.done.Store(true)
		return true
	}
	if st.Leader || m.single() || target > 0 {
		return false // nothing to ask
	}
	if st.LeaderAddr == "" || st.LeaderAddr == m.addr {
		return false
	}
	now := time.Now().UnixNano()
	if now-c.asked.Load() < int64(askEvery) || !c.asking.CompareAndSwap(false, true) {
		return false
	}
	c.asked.Store(now)
	leader := st.LeaderAddr
	go func() {
		defer c.asking.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), m.statusTimeout)
		defer cancel()
		ls, err := m.peer(leader, false).NodeStatus(ctx, false)
		if err != nil || ls.Role != "leader" || ls.CommitIndex == 0 {
			return // asked again on a later call
		}
		c.target.CompareAndSwap(0, ls.CommitIndex)
	}()
	return false
}

// PastThrough is the last log index whose entries this node learned
// late: the leader's commit index when this follower asked after its
// start (entries up to it were committed while it was down or before it
// joined, and reach it in a catch-up burst). 0 when there are none (a
// leader, whose own log held them, or a single node) or it is not known
// yet (CaughtUp is false then). The operator view's story and activity
// feed skips them (server: noteChanges): stamped with the catch-up's wall
// time they would be a false history.
func (m *Membership) PastThrough() uint64 { return m.caught.target.Load() }

// Behind is nil once the node has caught up (CaughtUp), else why not, an
// error that matches fence.ErrUnavailable: no leader known, or not yet
// caught up with what its leader committed.
func (m *Membership) Behind() error {
	if m.CaughtUp() {
		return nil
	}
	if st := m.node.Status(); !st.Leader && st.LeaderAddr == "" {
		return errBehindNoLeader
	}
	return errBehind
}

var (
	errBehindNoLeader = fmt.Errorf("%w: no leader known", fence.ErrUnavailable)
	errBehind         = fmt.Errorf("%w: this node started recently and has not yet applied what its cluster committed (it may not know the cluster's authentication yet): ask another node, or retry", fence.ErrUnavailable)
)

// WatchCaughtUp asks, until this node has caught up (or ctx ends), so that
// it is caught up by the time a call comes rather than from the first call
// on (the daemon runs it from the start).
func (m *Membership) WatchCaughtUp(ctx context.Context) {
	t := time.NewTicker(askEvery / 5)
	defer t.Stop()
	for !m.CaughtUp() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// caughtUpAt decides, from a node's status: a leader in office (its
// barrier at taking office applied everything committed before its term;
// what it commits after is applied in order, so a moment when its applied
// index trails its commit index under load is no gap); a follower that
// has applied the commit index target its leader reported (0: not known
// yet). Never a follower's own commit index: raft gives a follower
// min(leader's commit, its last entry).
func caughtUpAt(st node.Status, single bool, target uint64) bool {
	switch {
	case st.Leader:
		return st.InOffice
	case single:
		return false
	}
	return target > 0 && st.AppliedIndex >= target
}
