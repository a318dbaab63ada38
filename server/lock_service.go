package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// lockService implements fencev1connect.LockServiceHandler.
type lockService struct{ s *Server }

var _ fencev1connect.LockServiceHandler = lockService{}

func (h lockService) Acquire(ctx context.Context, req *connect.Request[fencev1.AcquireRequest]) (*connect.Response[fencev1.AcquireResponse], error) {
	// The reply's write deadline starts when it is ready (writes.go):
	// Connect writes it after this returns.
	defer replyReady(ctx)
	m := req.Msg
	cmd, err := withRef(m.GetSession(), func(b binding) (state.Command, error) { return h.s.acquireCommand(m, b) })
	return unary(ctx, h.s, fencev1connect.LockServiceAcquireProcedure, cmd, err, acquireReply)
}

func (h lockService) Renew(ctx context.Context, req *connect.Request[fencev1.RenewRequest]) (*connect.Response[fencev1.RenewResponse], error) {
	m := req.Msg
	cmd, err := withRef(m.GetSession(), func(b binding) (state.Command, error) { return h.s.renewCommand(m, b) })
	return unary(ctx, h.s, fencev1connect.LockServiceRenewProcedure, cmd, err, renewReply)
}

func (h lockService) Release(ctx context.Context, req *connect.Request[fencev1.ReleaseRequest]) (*connect.Response[fencev1.ReleaseResponse], error) {
	m := req.Msg
	cmd, err := withRef(m.GetSession(), func(b binding) (state.Command, error) { return releaseCommand(m, b) })
	return unary(ctx, h.s, fencev1connect.LockServiceReleaseProcedure, cmd, err, releaseReply)
}

func (h lockService) Get(ctx context.Context, req *connect.Request[fencev1.GetRequest]) (*connect.Response[fencev1.GetResponse], error) {
	const proc = fencev1connect.LockServiceGetProcedure
	if err := fence.ValidateName("name", req.Msg.GetName()); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	li, err := h.s.node.Lock(ctx, req.Msg.GetName())
	if err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	return connect.NewResponse(&fencev1.GetResponse{Lock: lockToProto(li)}), nil
}

func (h lockService) List(ctx context.Context, req *connect.Request[fencev1.ListRequest]) (*connect.Response[fencev1.ListResponse], error) {
	const proc = fencev1connect.LockServiceListProcedure
	m := req.Msg
	size, serr := pageSize(m.GetPageSize())
	after, terr := decodePageToken(m.GetPageToken())
	if err := firstErr(validatePrefix(m.GetPrefix()), serr, terr); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	locks, next, err := h.s.node.LocksPage(ctx, m.GetPrefix(), after, size)
	if err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	out := &fencev1.ListResponse{Locks: make([]*fencev1.LockInfo, 0, len(locks)), NextPageToken: encodePageToken(next)}
	for _, li := range locks {
		out.Locks = append(out.Locks, lockToProto(li))
	}
	return connect.NewResponse(out), nil
}
