package node

import (
	"time"

	"github.com/fenceworks/fence/state"
)

// reapOrphans withdraws the acquires that were queued when this node took
// office (clock c) and that no client waits for: their clients waited on a
// node that is gone (a crash, a restart), and a lock granted to them would
// sit with nobody for a whole TTL. One granted during the grace is released
// by its cancel (the machine releases a held request's lease). Clients get Config.WaiterGrace to
// re-attach (a retry with the same request_id registers a live attempt here
// and makes a newer attempt, so the cancel below, which names the attempt
// recorded at takeoffice, is a no-op for it). Session-bound acquires are
// treated alike: their client re-attaches by resending the seq, whose
// request_id is SessionRequestID(session, seq); a live session alone does
// not keep its queued acquire. It gives up if the node leaves office or
// closes.
func (n *Node) reapOrphans(c *leaderClock, queued []state.QueuedRequest) {
	defer n.wg.Done()
	grace := time.NewTimer(n.cfg.WaiterGrace)
	defer grace.Stop()
	graceC := grace.C
	if n.cfg.graceEnd != nil { // a test ends the grace (nil: never)
		graceC = nil
	}
	select {
	case <-n.closing:
		return
	case <-graceC:
	case <-n.cfg.graceEnd:
	}
	withdrawn := 0
	for _, q := range queued {
		if n.clock.Load() != c {
			return // left office: the next term reaps
		}
		if n.wait.has(q.RequestID) {
			continue
		}
		if err := n.abandonWait(q.Name, q.RequestID, q.Attempt); err != nil {
			return
		}
		withdrawn++
	}
	n.reaped.Add(1)
	n.cfg.Logger.Info("withdrew the queued acquires no client re-attached to", "withdrawn", withdrawn, "queued_at_takeoffice", len(queued), "grace", n.cfg.WaiterGrace)
}
