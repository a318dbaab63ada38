package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster/clusterapi"
)

// clusterService is the ClusterService: Deps.Cluster behind Connect.
type clusterService struct {
	s *Server
	m Membership
}

// clusterRoute is the ClusterService's route on the API router; without
// Deps.Cluster every call is answered Unimplemented.
func (s *Server) clusterRoute(opts []connect.HandlerOption) route {
	var svc fencev1connect.ClusterServiceHandler = fencev1connect.UnimplementedClusterServiceHandler{}
	if s.deps.Cluster != nil {
		svc = clusterService{s: s, m: s.deps.Cluster}
	}
	path, h := fencev1connect.NewClusterServiceHandler(svc, opts...)
	return route{prefix: path, h: h}
}

func (c clusterService) Members(ctx context.Context, req *connect.Request[fencev1.MembersRequest]) (*connect.Response[fencev1.MembersResponse], error) {
	ctx, err := c.s.requireAdmin(ctx, "Members")
	if err != nil {
		return nil, c.error(ctx, "Members", err)
	}
	res, err := c.m.Members(ctx)
	if err != nil {
		return nil, c.error(ctx, "Members", err)
	}
	return connect.NewResponse(membersToProto(res)), nil
}

func (c clusterService) AddMember(ctx context.Context, req *connect.Request[fencev1.AddMemberRequest]) (*connect.Response[fencev1.AddMemberResponse], error) {
	ctx, err := c.s.requireAdmin(ctx, "AddMember")
	if err != nil {
		return nil, c.error(ctx, "AddMember", err)
	}
	err = c.m.AddMember(ctx, req.Msg.GetId(), req.Msg.GetRaftAddr(), req.Msg.GetFresh(), req.Msg.GetJoinId())
	if err != nil {
		return nil, c.error(ctx, "AddMember", err)
	}
	c.s.log.Info("member added", "id", req.Msg.GetId(), "raft_addr", req.Msg.GetRaftAddr())
	return connect.NewResponse(&fencev1.AddMemberResponse{}), nil
}

func (c clusterService) RemoveMember(ctx context.Context, req *connect.Request[fencev1.RemoveMemberRequest]) (*connect.Response[fencev1.RemoveMemberResponse], error) {
	ctx, err := c.s.requireAdmin(ctx, "RemoveMember")
	if err != nil {
		return nil, c.error(ctx, "RemoveMember", err)
	}
	was, err := c.m.RemoveMember(ctx, req.Msg.GetId())
	if err != nil {
		return nil, c.error(ctx, "RemoveMember", err)
	}
	c.s.log.Info("member removed", "id", req.Msg.GetId(), "was_member", was)
	return connect.NewResponse(&fencev1.RemoveMemberResponse{WasMember: was}), nil
}

func (c clusterService) TransferLeadership(ctx context.Context, req *connect.Request[fencev1.TransferLeadershipRequest]) (*connect.Response[fencev1.TransferLeadershipResponse], error) {
	ctx, err := c.s.requireAdmin(ctx, "TransferLeadership")
	if err != nil {
		return nil, c.error(ctx, "TransferLeadership", err)
	}
	leader, err := c.m.TransferLeadership(ctx, req.Msg.GetId())
	if err != nil {
		return nil, c.error(ctx, "TransferLeadership", err)
	}
	return connect.NewResponse(&fencev1.TransferLeadershipResponse{Leader: leader}), nil
}

func (c clusterService) NodeStatus(ctx context.Context, req *connect.Request[fencev1.NodeStatusRequest]) (*connect.Response[fencev1.NodeStatusResponse], error) {
	ctx, full, err := c.s.statusReader(ctx)
	if err != nil {
		return nil, c.error(ctx, "NodeStatus", err)
	}
	if !full {
		// A principal that is not an admin learns only whether this node
		// leads and can serve: what a client needs to find the leader
		// (client/spread.go) and nothing of the cluster's ids, addresses
		// or counts.
		st := c.m.NodeStatus(false)
		return connect.NewResponse(&fencev1.NodeStatusResponse{Role: st.Role, Ready: st.Ready}), nil
	}
	// adding admits a node that started empty to answer raft
	// (node.Config.AdmitOnAdd): it counts only from the raft port's API
	// side, where a leader about to add the node asks; on the client port
	// it is ignored.
	st := c.m.NodeStatus(req.Msg.GetAdding() && clusterapi.FromPeer(ctx))
	st.InsecureListen = c.s.cfg.InsecureListen
	return connect.NewResponse(nodeStatusToProto(st)), nil
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
	case c.s.deps.Errors.ChangeRefused != nil && c.s.deps.Errors.ChangeRefused(err):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case fence.ReasonOf(err) != "":
		return apierr.ToConnect(err)
	case is(err, c.s.deps.Errors.NotLeader), is(err, c.s.deps.Errors.UnknownOutcome), errors.Is(err, fence.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	case is(err, c.s.deps.Errors.Closed) || c.s.draining():
		return connect.NewError(connect.CodeUnavailable, errShuttingDown)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apierr.ToConnect(err)
	}
	// raft refused the change itself (e.g. removing the last voter, a
	// transfer to a non-voter): nothing a retry would change.
	c.s.log.Warn("membership change refused", "procedure", procedure, "err", err)
	return connect.NewError(connect.CodeFailedPrecondition, err)
}
