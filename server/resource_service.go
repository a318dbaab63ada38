package server

import (
	"context"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// resourceService implements fencev1connect.ResourceServiceHandler.
type resourceService struct{ s *Server }

var _ fencev1connect.ResourceServiceHandler = resourceService{}

func (h resourceService) Write(ctx context.Context, req *connect.Request[fencev1.WriteRequest]) (*connect.Response[fencev1.WriteResponse], error) {
	m := req.Msg
	do, err := withRef(m.GetSession(), func(b binding) (call[fencev1.WriteResponse], error) { return h.s.writeCall(m, b) })
	return unary(ctx, h.s, fencev1connect.ResourceServiceWriteProcedure, do, err)
}

func (h resourceService) Add(ctx context.Context, req *connect.Request[fencev1.AddRequest]) (*connect.Response[fencev1.AddResponse], error) {
	m := req.Msg
	do, err := withRef(m.GetSession(), func(b binding) (call[fencev1.AddResponse], error) { return h.s.addCall(m, b) })
	return unary(ctx, h.s, fencev1connect.ResourceServiceAddProcedure, do, err)
}

func (h resourceService) Read(ctx context.Context, req *connect.Request[fencev1.ReadRequest]) (*connect.Response[fencev1.ReadResponse], error) {
	do, err := h.s.readCall(req.Msg.GetResource())
	return unary(ctx, h.s, fencev1connect.ResourceServiceReadProcedure, do, err)
}

func (h resourceService) Delete(ctx context.Context, req *connect.Request[fencev1.DeleteRequest]) (*connect.Response[fencev1.DeleteResponse], error) {
	m := req.Msg
	do, err := withRef(m.GetSession(), func(b binding) (call[fencev1.DeleteResponse], error) { return h.s.deleteCall(m, b) })
	return unary(ctx, h.s, fencev1connect.ResourceServiceDeleteProcedure, do, err)
}
