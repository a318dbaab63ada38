package client

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// Which node a Client uses (docs/clients.md, "Which node a Client uses").
//
// Measured (docs/benchmarks.md, "Sessions: the leader, spread, a
// follower"): a session on a follower costs the cluster about 1.6 to 2×
// the server CPU of one on the leader — the follower reads, validates and
// forwards each request, and the leader serves the forwarded call — and the
// leader's own CPU per request is higher for a forwarded call than for one
// on its own stream. So a Client with several endpoints goes to the leader:
// before its first call, and whenever its session's stream is opened
// again after a break, it asks every endpoint's NodeStatus at once and
// uses the first that says it leads. When none says so (no leader yet,
// NodeStatus refused: it needs an admin token when authentication is on)
// it keeps the endpoint it is at, and Clients start spread over the
// endpoints (spreadStart) so that they do not all crowd the first.

// spreadFirst is this process's first endpoint index (random, so that
// processes that each make one Client do not all start at the same node);
// spreadNext counts the Clients made since. The Clients of one process
// start at successive endpoints from spreadFirst: n Clients over k
// endpoints start n/k or n/k+1 at each.
var (
	spreadFirst = rand.Uint32()
	spreadNext  atomic.Uint32
)

// spreadStart returns the endpoint a new Client of n endpoints starts at.
func spreadStart(n int) int32 {
	if n <= 1 {
		return 0
	}
	k := spreadFirst + spreadNext.Add(1) - 1
	return int32(k % uint32(n))
}

// leaderAskTimeout bounds the NodeStatus calls that look for the leader: a
// node that does not answer by then (stopped, cut off) is passed over.
const leaderAskTimeout = time.Second

// seekLeader moves the Client to the endpoint that says it leads, asking
// every endpoint's NodeStatus at once and taking the first leader that
// answers. It returns at once with one endpoint or WithEndpointsInOrder,
// and leaves the Client where it is when no endpoint says it leads within
// limit (at most leaderAskTimeout) or ctx.
func (c *Client) seekLeader(ctx context.Context, limit time.Duration) {
	if len(c.endpoints) <= 1 || c.cfg.inOrder || c.noStatus.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, min(limit, leaderAskTimeout, c.cfg.attemptTimeout))
	defer cancel()
	found := make(chan int32, len(c.endpoints))
	for _, ep := range c.endpoints {
		go func() {
			r, err := ep.cluster.NodeStatus(ctx, connect.NewRequest(&fencev1.NodeStatusRequest{}))
			if err == nil && r.Msg.GetRole() == "leader" {
				found <- ep.idx
				return
			}
			switch connect.CodeOf(err) {
			case connect.CodePermissionDenied, connect.CodeUnauthenticated, connect.CodeUnimplemented:
				// Not for this Client (NodeStatus needs an admin token
				// under authentication): do not ask again.
				c.noStatus.Store(true)
			}
			found <- -1
		}()
	}
	for range c.endpoints {
		select {
		case i := <-found:
			if i < 0 {
				continue
			}
			if old := c.cur.Swap(i); old != i {
				c.cfg.logger.Debug("fence: moving to the leader", "from", c.endpoints[old].url, "to", c.endpoints[i].url)
			}
			return
		case <-ctx.Done():
			return
		}
	}
}
