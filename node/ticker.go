package node

import (
	"context"
	"time"

	"github.com/fenceworks/fence/state"
)

// runTicker drives expiry on the leader: it sleeps until the machine's next
// deadline (decision time) is reached by the leader clock minus the current
// slack, and proposes one OpTick. Any applied batch
// (kick) or change of office makes it look again, so ticks are coalesced:
// one tick expires everything due.
func (n *Node) runTicker() {
	defer n.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var lastTick int64 = -1
	var lastClock *leaderClock
	for {
		c := n.clock.Load()
		if c != lastClock {
			// A new term of office: what an earlier term ticked says
			// nothing about what is pending now.
			lastTick, lastClock = -1, c
		}
		if c == nil {
			select {
			case <-n.closing:
				return
			case <-n.officeC:
			}
			continue
		}
		var at int64
		var ok bool
		n.fsm.read(func(m *state.Machine) { at, ok = m.NextDeadline() })
		if ok && at <= lastTick {
			// A tick at or after this deadline was applied and it is
			// still pending: do not spin; wait for the next change.
			ok = false
		}
		if !ok {
			select {
			case <-n.closing:
				return
			case <-n.officeC:
			case <-n.fsm.kick:
			}
			continue
		}
		// at is in decision time: a tick acts on it once Now - Slack >= at.
		// The charged slack may fall (at falls) before the tick is due:
		// wake then and look again.
		if now, slack, falls := c.lag.peek(c); now-int64(slack) < at {
			d := time.Duration(at-now) + slack
			if falls < now+int64(d) {
				d = time.Duration(falls - now)
			}
			timer.Reset(d)
			select {
			case <-n.closing:
				timer.Stop()
				return
			case <-n.officeC:
			case <-n.fsm.kick:
			case <-timer.C:
			}
			timer.Stop()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), cancelWaitTimeout)
		tick := state.Command{Op: state.OpTick}
		n.ticks.Add(1)
		_, err := n.propose(ctx, &tick)
		cancel()
		if err != nil {
			n.cfg.Logger.Warn("tick failed", "err", err)
			select {
			case <-n.closing:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		lastTick = tick.Now - int64(tick.Slack) // its decision time (at least)
	}
}
