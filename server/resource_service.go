package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// resourceService implements fencev1connect.ResourceServiceHandler.
type resourceService struct{ s *Server }

var _ fencev1connect.ResourceServiceHandler = resourceService{}

func (h resourceService) Write(ctx context.Context, req *connect.Request[fencev1.WriteRequest]) (*connect.Response[fencev1.WriteResponse], error) {
	m := req.Msg
	cmd, err := withRef(m.GetSession(), func(b binding) (state.Command, error) { return writeCommand(m, b) })
	return unary(ctx, h.s, fencev1connect.ResourceServiceWriteProcedure, cmd, err, writeReply)
}

func (h resourceService) Add(ctx context.Context, req *connect.Request[fencev1.AddRequest]) (*connect.Response[fencev1.AddResponse], error) {
	m := req.Msg
	cmd, err := withRef(m.GetSession(), func(b binding) (state.Command, error) { return addCommand(m, b) })
	return unary(ctx, h.s, fencev1connect.ResourceServiceAddProcedure, cmd, err, addReply)
}

func (h resourceService) Read(ctx context.Context, req *connect.Request[fencev1.ReadRequest]) (*connect.Response[fencev1.ReadResponse], error) {
	const proc = fencev1connect.ResourceServiceReadProcedure
	if err := fence.ValidateName("resource", req.Msg.GetResource()); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	rs, err := h.s.node.Resource(ctx, req.Msg.GetResource())
	if err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	return connect.NewResponse(&fencev1.ReadResponse{State: resourceToProto(&rs)}), nil
}

func (h resourceService) Delete(ctx context.Context, req *connect.Request[fencev1.DeleteRequest]) (*connect.Response[fencev1.DeleteResponse], error) {
	m := req.Msg
	cmd, err := withRef(m.GetSession(), func(b binding) (state.Command, error) { return deleteCommand(m, b) })
	return unary(ctx, h.s, fencev1connect.ResourceServiceDeleteProcedure, cmd, err, deleteReply)
}
