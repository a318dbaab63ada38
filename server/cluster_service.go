package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/internal/apierr"
	"github.com/fenceworks/fence/node"
)

// clusterService is the ClusterService: package cluster's Membership
// behind Connect. Changes carry whether they were forwarded by another node
// (cluster.ForwardedHeader), so the leader's answer is never forwarded again.
type clusterService struct {
	s *Server
	m *cluster.Membership
}

func (c clusterService) Members(ctx context.Context, req *connect.Request[fencev1.MembersRequest]) (*connect.Response[fencev1.MembersResponse], error) {
	res, err := c.m.Members(ctx)
	if err != nil {
		return nil, c.error(ctx, "Members", err)
	}
	return connect.NewResponse(membersToProto(res)), nil
}

func (c clusterService) AddMember(ctx context.Context, req *connect.Request[fencev1.AddMemberRequest]) (*connect.Response[fencev1.AddMemberResponse], error) {
	err := c.m.AddMember(ctx, cluster.IsForwarded(ctx), req.Msg.GetId(), req.Msg.GetRaftAddr(), req.Msg.GetFresh(), req.Msg.GetJoinId())
	if err != nil {
		return nil, c.error(ctx, "AddMember", err)
	}
	c.s.log.Info("member added", "id", req.Msg.GetId(), "raft_addr", req.Msg.GetRaftAddr())
	return connect.NewResponse(&fencev1.AddMemberResponse{}), nil
}

func (c clusterService) RemoveMember(ctx context.Context, req *connect.Request[fencev1.RemoveMemberRequest]) (*connect.Response[fencev1.RemoveMemberResponse], error) {
	was, err := c.m.RemoveMember(ctx, cluster.IsForwarded(ctx), req.Msg.GetId())
	if err != nil {
		return nil, c.error(ctx, "RemoveMember", err)
	}
	c.s.log.Info("member removed", "id", req.Msg.GetId(), "was_member", was)
	return connect.NewResponse(&fencev1.RemoveMemberResponse{WasMember: was}), nil
}

func (c clusterService) TransferLeadership(ctx context.Context, req *connect.Request[fencev1.TransferLeadershipRequest]) (*connect.Response[fencev1.TransferLeadershipResponse], error) {
	leader, err := c.m.TransferLeadership(ctx, cluster.IsForwarded(ctx), req.Msg.GetId())
	if err != nil {
		return nil, c.error(ctx, "TransferLeadership", err)
	}
	return connect.NewResponse(&fencev1.TransferLeadershipResponse{Leader: leader}), nil
}

func (c clusterService) NodeStatus(ctx context.Context, req *connect.Request[fencev1.NodeStatusRequest]) (*connect.Response[fencev1.NodeStatusResponse], error) {
	return connect.NewResponse(nodeStatusToProto(c.m.NodeStatus(req.Msg.GetAdding()))), nil
}

// error maps a membership error to what the caller sees. An answer of the
// leader (a forwarded change) is passed on exactly as the leader sent it;
// a node that cannot act now (not the leader, none known, shutting down,
// an outcome lost with leadership) answers Unavailable, which the caller
// may retry (every change is idempotent); a single node refuses changes
// with FailedPrecondition.
func (c clusterService) error(ctx context.Context, procedure string, err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, cluster.ErrSingleNode), errors.Is(err, cluster.ErrLastVoter), errors.As(err, new(*cluster.ConflictError)):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case fence.ReasonOf(err) != "":
		return apierr.ToConnect(err)
	case errors.Is(err, node.ErrNotLeader), errors.Is(err, node.ErrUnknownOutcome), errors.Is(err, fence.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, node.ErrClosed) || c.s.draining():
		return connect.NewError(connect.CodeUnavailable, errShuttingDown)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apierr.ToConnect(err)
	}
	// raft refused the change itself (e.g. removing the last voter, a
	// transfer to a non-voter): nothing a retry would change.
	c.s.log.Warn("membership change refused", "procedure", procedure, "err", err)
	return connect.NewError(connect.CodeFailedPrecondition, err)
}
