package node

import (
	"context"
	"fmt"
	"time"

	"github.com/fenceworks/fence/state"
)

// readIndex makes a read linearizable (read-index protocol): note the
// commit index, confirm leadership, wait until the FSM has applied up to the
// noted index. It returns the leader clock to read at.
//
// The clock's term must still be raft's term after VerifyLeader: then this
// node has led without a break since the barrier that opened the term, so
// its commit index covers every entry committed before the read began (a
// leader of a later term may not have committed its own first entry yet,
// and its commit index may lag). A follower or a deposed leader answers
// ErrNotLeader and never reads its own, possibly stale, state.
func (n *Node) readIndex(ctx context.Context) (int64, error) {
	c := n.office()
	if c == nil {
		return 0, ErrNotLeader
	}
	ci := n.raft.CommitIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	if n.raft.CurrentTerm() != c.term {
		return 0, fmt.Errorf("%w: the term of office (%d) has ended", ErrNotLeader, c.term)
	}
	for {
		applied, next := n.fsm.appliedWait()
		if applied >= ci {
			break
		}
		select {
		case <-next:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-n.closing:
			return 0, ErrClosed
		}
	}
	return c.now(), nil
}

// Lock describes one lock, linearizably, at the leader clock.
func (n *Node) Lock(ctx context.Context, name string) (state.LockInfo, error) {
	now, err := n.readIndex(ctx)
	if err != nil {
		return state.LockInfo{}, err
	}
	var li state.LockInfo
	n.fsm.read(func(m *state.Machine) { li = m.Lock(name, now) })
	return li, nil
}

// Locks lists the locks whose names start with prefix, sorted by name.
func (n *Node) Locks(ctx context.Context, prefix string) ([]state.LockInfo, error) {
	now, err := n.readIndex(ctx)
	if err != nil {
		return nil, err
	}
	var out []state.LockInfo
	n.fsm.read(func(m *state.Machine) { out = m.Locks(prefix, now) })
	return out, nil
}

// Resource reads a fenced resource, linearizably.
func (n *Node) Resource(ctx context.Context, name string) (state.ResourceState, error) {
	if _, err := n.readIndex(ctx); err != nil {
		return state.ResourceState{}, err
	}
	var rs state.ResourceState
	n.fsm.read(func(m *state.Machine) { rs = m.Resource(name) })
	return rs, nil
}

// Session describes live session id, linearizably, at the leader clock; ok
// is false if it is not live (never opened, closed, or expired).
func (n *Node) Session(ctx context.Context, id uint64) (info state.SessionInfo, ok bool, err error) {
	now, err := n.readIndex(ctx)
	if err != nil {
		return state.SessionInfo{}, false, err
	}
	n.fsm.read(func(m *state.Machine) { info, ok = m.Session(id, now) })
	return info, ok, nil
}

// ReadState runs fn on the applied state (the local replica, not a
// linearizable read) under the read lock; fn must not keep m. The server
// reads the auth state this way: a node refuses a revoked token as soon as
// it has applied the revocation.
func (n *Node) ReadState(fn func(m *state.Machine)) { n.fsm.read(fn) }

// AuthEnabled reports whether the applied state has auth checking on,
// without the state's lock (the server's fast path for every call).
func (n *Node) AuthEnabled() bool { return n.fsm.authOn.Load() }

// ReadStateAt runs fn on the applied state, under its read lock, with the
// node's estimate of server time now: the leader clock if this node holds
// office; else the state's time plus the time elapsed (monotonic) since
// the state last changed here (a lower bound: the leader stamped that
// entry before it was applied). The state's own time moves only with
// commits, so on an idle store it stands still. For views only (the
// operator's session list: how long ago a session was kept alive); every
// decision is the state's, at the leader clock.
func (n *Node) ReadStateAt(fn func(m *state.Machine, now int64)) {
	c := n.office()
	n.fsm.read(func(m *state.Machine) {
		now := m.Now()
		switch {
		case c != nil:
			now = max(now, c.now())
		case !n.fsm.appliedAt.IsZero():
			now += int64(time.Since(n.fsm.appliedAt))
		}
		fn(m, now)
	})
}
