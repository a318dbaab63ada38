package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// statusTimeout bounds one NodeStatus call: a paused or partitioned node
// must not hold up Leader.
const statusTimeout = time.Second

// ClusterClient is a ClusterService client of this node's client port.
// Mutations sent to a follower are forwarded to the leader by the node.
func (s *Server) ClusterClient() fencev1connect.ClusterServiceClient {
	return fencev1connect.NewClusterServiceClient(s.HTTPClient(), s.URL())
}

// Status asks the node for its own NodeStatus (never forwarded), bounded
// by a second.
func (s *Server) Status(ctx context.Context) (*fencev1.NodeStatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	resp, err := s.ClusterClient().NodeStatus(ctx, connect.NewRequest(&fencev1.NodeStatusRequest{}))
	if err != nil {
		return nil, fmt.Errorf("harness: NodeStatus of %s: %w", s.ID(), err)
	}
	return resp.Msg, nil
}

// ErrNoLeader: no node is the leader a majority of the members agree on.
var ErrNoLeader = errors.New("harness: no leader")

// Leader asks every running, unpaused member for its NodeStatus and
// returns the node that says it leads, is ready (in office), and that a
// majority of the members (counting those that did not answer as
// dissenting) name as leader. A deposed leader cut off in a minority may
// still think it leads for a moment; it has no majority behind it. With
// several such claims (none in practice) the highest term wins.
func (c *Cluster) Leader(ctx context.Context) (*Server, error) {
	return LeaderOf(ctx, c.Members())
}

// LeaderOf is Cluster.Leader over the given members (the nodes of the
// current raft configuration), for callers that keep their own node list
// (testkit/chaos).
func LeaderOf(ctx context.Context, members []*Server) (*Server, error) {
	type answer struct {
		s  *Server
		st *fencev1.NodeStatusResponse
	}
	answers := make(chan answer, len(members))
	asked := 0
	for _, n := range members {
		if !n.Running() || n.Paused() {
			continue
		}
		asked++
		go func() {
			st, _ := n.Status(ctx)
			answers <- answer{n, st}
		}()
	}
	votes := map[string]int{}
	var claims []answer
	for range asked {
		a := <-answers
		if a.st == nil {
			continue
		}
		if a.st.LeaderId != "" {
			votes[a.st.LeaderId]++
		}
		if a.st.Role == "leader" && a.st.Ready && a.st.LeaderId == a.st.Id {
			claims = append(claims, a)
		}
	}
	slices.SortFunc(claims, func(a, b answer) int { return -cmp.Compare(a.st.Term, b.st.Term) })
	for _, a := range claims {
		if votes[a.st.Id] > len(members)/2 {
			return a.s, nil
		}
	}
	return nil, ErrNoLeader
}

// WaitLeader polls Leader until it names a node other than those in not
// (e.g. the leader just killed), or ctx ends (then the error says what the
// last poll saw).
func (c *Cluster) WaitLeader(ctx context.Context, not ...*Server) (*Server, error) {
	for {
		l, err := c.Leader(ctx)
		if err == nil && !slices.Contains(not, l) {
			return l, nil
		}
		if err == nil {
			err = fmt.Errorf("harness: %s still leads", l.ID())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("harness: waiting for a leader: %w (last: %v); nodes:\n%s", ctx.Err(), err, c)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Transfer asks the leader (through any running member) to hand
// leadership to s (nil: to any other voter) and waits until the cluster
// agrees on the new leader, which it returns. Transferring to the node
// that leads already changes nothing.
func (c *Cluster) Transfer(ctx context.Context, s *Server) (*Server, error) {
	old, err := c.WaitLeader(ctx)
	if err != nil {
		return nil, err
	}
	if old == s {
		return s, nil
	}
	id := ""
	if s != nil {
		id = s.ID()
	}
	req := connect.NewRequest(&fencev1.TransferLeadershipRequest{Id: id})
	if _, err := old.ClusterClient().TransferLeadership(ctx, req); err != nil {
		return nil, fmt.Errorf("harness: transfer leadership from %s to %q: %w", old.ID(), id, err)
	}
	l, err := c.WaitLeader(ctx, old)
	if err != nil {
		return nil, err
	}
	if s != nil && l != s {
		return nil, fmt.Errorf("harness: asked for %s, %s leads", s.ID(), l.ID())
	}
	return l, nil
}

// RemoveMember removes s from the raft configuration (through a running
// member, which forwards to the leader) and marks it removed. s keeps
// running.
func (c *Cluster) RemoveMember(ctx context.Context, s *Server) error {
	var errs []error
	for _, n := range c.Members() {
		if n == s || !n.Running() || n.Paused() {
			continue
		}
		_, err := n.ClusterClient().RemoveMember(ctx, connect.NewRequest(&fencev1.RemoveMemberRequest{Id: s.ID()}))
		if err == nil {
			c.MarkRemoved(s)
			return nil
		}
		errs = append(errs, fmt.Errorf("via %s: %w", n.ID(), err))
	}
	return fmt.Errorf("harness: remove %s: %w", s.ID(), errors.Join(errs...))
}

// MembersOf lists the raft configuration as the node s answers it.
func (s *Server) MembersOf(ctx context.Context) (*fencev1.MembersResponse, error) {
	resp, err := s.ClusterClient().Members(ctx, connect.NewRequest(&fencev1.MembersRequest{}))
	if err != nil {
		return nil, fmt.Errorf("harness: Members of %s: %w", s.ID(), err)
	}
	return resp.Msg, nil
}
