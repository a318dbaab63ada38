package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/testkit/harness"
)

// The membership side of a raft cluster, through ClusterService on the
// nodes' own client ports (not their proxies: the nemesis must reach a node
// whose clients it cuts off).

// ErrNoLeader: no node is the leader a majority of the nodes agree on.
var ErrNoLeader = errors.New("chaos: no leader")

// Leader returns the index of the node that says it leads and is ready
// (in office), and that a majority of the nodes name as leader
// (harness.LeaderOf over the nodes' current processes, which Rejoin
// replaces): a deposed leader cut off in a minority may think it leads
// for a moment, without a majority behind it. A single node leads itself.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	if !c.Raft() {
		if len(c.Nodes) == 1 {
			return 0, nil
		}
		return -1, ErrNoLeader
	}
	servers := make([]*harness.Server, len(c.Nodes))
	for i, n := range c.Nodes {
		servers[i] = n.server()
	}
	l, err := harness.LeaderOf(ctx, servers)
	if err != nil {
		return -1, ErrNoLeader
	}
	return slices.Index(servers, l), nil
}

// WaitLeader polls Leader until it names a node not in not, or ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context, not ...int) (int, error) {
	for {
		l, err := c.Leader(ctx)
		if err == nil && !slices.Contains(not, l) {
			return l, nil
		}
		if err == nil {
			err = fmt.Errorf("chaos: node %d still leads", l)
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("chaos: waiting for a leader: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Followers are the nodes other than leader, running or not.
func (c *Cluster) Followers(leader int) []int {
	var out []int
	for i := range c.Nodes {
		if i != leader {
			out = append(out, i)
		}
	}
	return out
}

// Transfer asks the cluster (through a running node, which forwards to the
// leader) to hand leadership to node to, and waits until a majority agrees
// that it leads. A node that leads already is left leading.
func (c *Cluster) Transfer(ctx context.Context, to int) error {
	target, err := c.Node(to)
	if err != nil {
		return err
	}
	if l, err := c.Leader(ctx); err == nil && l == to {
		return nil
	}
	req := connect.NewRequest(&fencev1.TransferLeadershipRequest{Id: target.ID()})
	var errs []error
	sent := false
	for _, i := range c.order(to) {
		n := c.Nodes[i]
		if !n.Running() || n.Paused() {
			continue
		}
		if _, err := n.server().ClusterClient().TransferLeadership(ctx, req); err != nil {
			errs = append(errs, fmt.Errorf("via %s: %w", n.Name(), err))
			continue
		}
		sent = true
		break
	}
	if !sent {
		return fmt.Errorf("chaos: transfer leadership to %s: %w", target.Name(), errors.Join(errs...))
	}
	for {
		l, err := c.Leader(ctx)
		if err == nil && l == to {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: transfer leadership to %s: not the leader: %w (last: %d, %v)", target.Name(), ctx.Err(), l, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// order is every node index but skip, in index order.
func (c *Cluster) order(skip int) []int {
	var out []int
	for i := range c.Nodes {
		if i != skip {
			out = append(out, i)
		}
	}
	return out
}

// RemoveMember removes node i from the raft configuration, through another
// running node (which forwards to the leader). Node i keeps running.
func (c *Cluster) RemoveMember(ctx context.Context, i int) error {
	target, err := c.Node(i)
	if err != nil {
		return err
	}
	req := connect.NewRequest(&fencev1.RemoveMemberRequest{Id: target.ID()})
	var errs []error
	for _, j := range c.order(i) {
		n := c.Nodes[j]
		if !n.Running() || n.Paused() {
			continue
		}
		if _, err := n.server().ClusterClient().RemoveMember(ctx, req); err != nil {
			errs = append(errs, fmt.Errorf("via %s: %w", n.Name(), err))
			continue
		}
		return nil
	}
	return fmt.Errorf("chaos: remove %s: %w", target.Name(), errors.Join(errs...))
}

// Voters lists the ids of the voters in the configuration as node i
// answers it (forwarded to the leader).
func (c *Cluster) Voters(ctx context.Context, i int) ([]string, error) {
	n, err := c.Node(i)
	if err != nil {
		return nil, err
	}
	resp, err := n.server().MembersOf(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range resp.Members {
		if m.Suffrage == "voter" {
			ids = append(ids, m.Id)
		}
	}
	return ids, nil
}
