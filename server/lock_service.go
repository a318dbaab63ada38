package server

import (
	"context"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// lockService implements fencev1connect.LockServiceHandler.
type lockService struct{ s *Server }

var _ fencev1connect.LockServiceHandler = lockService{}

func (h lockService) Acquire(ctx context.Context, req *connect.Request[fencev1.AcquireRequest]) (*connect.Response[fencev1.AcquireResponse], error) {
	// The reply's write deadline starts when it is ready (writes.go):
	// Connect writes it after this returns.
	defer replyReady(ctx)
	m := req.Msg
	do, err := withRef(m.GetSession(), func(b binding) (call[fencev1.AcquireResponse], error) { return h.s.acquireCall(m, b) })
	return unary(ctx, h.s, fencev1connect.LockServiceAcquireProcedure, do, err)
}

func (h lockService) Renew(ctx context.Context, req *connect.Request[fencev1.RenewRequest]) (*connect.Response[fencev1.RenewResponse], error) {
	m := req.Msg
	do, err := withRef(m.GetSession(), func(b binding) (call[fencev1.RenewResponse], error) { return h.s.renewCall(m, b) })
	return unary(ctx, h.s, fencev1connect.LockServiceRenewProcedure, do, err)
}

func (h lockService) Release(ctx context.Context, req *connect.Request[fencev1.ReleaseRequest]) (*connect.Response[fencev1.ReleaseResponse], error) {
	m := req.Msg
	do, err := withRef(m.GetSession(), func(b binding) (call[fencev1.ReleaseResponse], error) { return h.s.releaseCall(m, b) })
	return unary(ctx, h.s, fencev1connect.LockServiceReleaseProcedure, do, err)
}

func (h lockService) Get(ctx context.Context, req *connect.Request[fencev1.GetRequest]) (*connect.Response[fencev1.GetResponse], error) {
	do, err := h.s.getCall(req.Msg.GetName())
	return unary(ctx, h.s, fencev1connect.LockServiceGetProcedure, do, err)
}

func (h lockService) List(ctx context.Context, req *connect.Request[fencev1.ListRequest]) (*connect.Response[fencev1.ListResponse], error) {
	do, err := h.s.listCall(req.Msg)
	return unary(ctx, h.s, fencev1connect.LockServiceListProcedure, do, err)
}
