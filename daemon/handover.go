package daemon

import (
	"context"
	"time"
)

// handOver transfers leadership to another voter when this node leads a
// cluster, before the server drains: while it drains (up to
// Config.ShutdownTimeout) it still ran raft and led, so the followers kept
// forwarding to a node that no longer serves, and nobody else could be
// elected; handed over first, the followers' forwarded calls, and clients
// that move on, reach the new leader during the drain. The transfer is
// bounded by ctx and by raft (which gives up after an election timeout). A
// failure is logged and the drain goes on: node.Close tries once more,
// else the others elect a leader after their election timeout.
//
// It runs after the waiting acquires were cancelled (server.Drain), so their
// withdrawals are proposed by this leader while it still leads, or, if the
// transfer wins the race, they stay queued as orphans for the new leader,
// which keeps them for its WaiterGrace: their clients, answered
// Unavailable, retry there with the same request_id and keep their place.
func (d *Daemon) handOver(ctx context.Context) {
	if d.cluster == nil || d.cluster.mux == nil || !d.node.IsLeader() {
		return
	}
	members, err := d.node.Members(ctx)
	if err != nil {
		d.log.Warn("leadership transfer before the drain: members unknown; the node tries again as it closes", "err", err)
		return
	}
	others := 0
	for _, m := range members {
		if m.Voter && m.ID != d.node.ID() {
			others++
		}
	}
	if others == 0 {
		return // a cluster of one: nobody to hand over to
	}
	start := time.Now()
	if err := d.node.TransferLeadership(ctx, ""); err != nil {
		d.log.Warn("leadership transfer before the drain failed; the node tries again as it closes", "err", err)
		return
	}
	// raft's transfer is done when this node stepped down; it learns the
	// new leader from the new leader's first heartbeat, a moment later.
	to, addr := d.newLeader(ctx, handOverHeard)
	if to == "" {
		d.log.Info("handed leadership over before draining; the new leader not heard from yet", "waited", handOverHeard, "took", time.Since(start))
		return
	}
	d.log.Info("handed leadership over before draining", "to", to, "to_addr", addr, "took", time.Since(start))
}

// handOverHeard bounds how long handOver waits to hear from the new leader
// (only to name it in the log; the drain waits for it).
const handOverHeard = 2 * time.Second

// newLeader waits (at most wait, and while ctx lasts) until this node knows
// a leader other than itself, and returns it ("" if none).
func (d *Daemon) newLeader(ctx context.Context, wait time.Duration) (id, addr string) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, addr = d.node.Leader(); id != "" && id != d.node.ID() {
			return id, addr
		}
		select {
		case <-ctx.Done():
			return "", ""
		case <-tick.C:
		}
	}
}
