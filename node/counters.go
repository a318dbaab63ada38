package node

import (
	"sync/atomic"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// StaleReasons are the refusals of a token that is no longer good for the
// lock or resource it names (Counters.Stale's keys): a fenced write,
// add, delete, a renew or release with an old, foreign or unknown token.
var StaleReasons = []fence.Reason{fence.ReasonStaleToken, fence.ReasonNotHolder, fence.ReasonLeaseExpired, fence.ReasonUnknownToken}

// Counters are the state events this node's FSM applied since the process
// started (every node counts what it applies, leader or follower; a
// restart counts again what it replays from the log). Replayed results (a
// retry answered from memory) are not counted: nothing happened again.
type Counters struct {
	// Grants: leases granted, at once or to a queued acquire.
	Grants uint64
	// Busy: acquires refused BUSY, at once or when their wait ran out.
	Busy uint64
	// Stale: refusals of an outdated token, by reason (StaleReasons).
	Stale map[fence.Reason]uint64
	// Releases: leases ended by their holder (release, session close, a
	// cancelled wait's grant); Expiries: leases whose TTL or session ran
	// out in server time. Every lease ends once, one way or the other.
	Releases, Expiries uint64
}

// counters are the FSM's counts (written on raft's FSM goroutine, read at
// any time).
type counters struct {
	grants, busy, releases, expiries atomic.Uint64
	stale                            [4]atomic.Uint64 // by StaleReasons
}

// result counts what one applied command's result says: its events (the
// outcomes of queued acquires it decided), and, unless it was answered
// from memory, its own grant (an acquire's lease; a renew's is not a
// grant) or refusal.
func (c *counters) result(op state.Op, res *state.Result) {
	for i := range res.Events {
		c.outcome(res.Events[i].Lease != nil, res.Events[i].Err)
	}
	if !res.Replayed {
		c.outcome(op == state.OpAcquire && res.Lease != nil, res.Err)
	}
}

// outcome counts a grant or a refusal.
func (c *counters) outcome(granted bool, err error) {
	if granted {
		c.grants.Add(1)
	}
	if err == nil {
		return
	}
	switch r := fence.ReasonOf(err); r {
	case fence.ReasonBusy:
		c.busy.Add(1)
	default:
		for i, s := range StaleReasons {
			if r == s {
				c.stale[i].Add(1)
			}
		}
	}
}

// leaseEnds adds the machine's lease ends between two readings of
// state.Machine.LeaseEnds (taken around one batch, under the write lock).
func (c *counters) leaseEnds(rel0, exp0, rel1, exp1 uint64) {
	c.releases.Add(rel1 - rel0)
	c.expiries.Add(exp1 - exp0)
}

// Counters reports the state events applied since the process started.
func (n *Node) Counters() Counters {
	c := &n.fsm.counts
	out := Counters{Grants: c.grants.Load(), Busy: c.busy.Load(), Releases: c.releases.Load(), Expiries: c.expiries.Load(),
		Stale: make(map[fence.Reason]uint64, len(StaleReasons))}
	for i, r := range StaleReasons {
		out.Stale[r] = c.stale[i].Load()
	}
	return out
}
