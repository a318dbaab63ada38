package server

import (
	"context"
	"errors"

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
	const proc = fencev1connect.ResourceServiceWriteProcedure
	m := req.Msg
	if err := firstErr(fence.ValidateName("resource", m.GetResource()), fence.ValidateToken(fence.Token(m.GetToken())),
		fence.ValidateValue(m.GetValue()), fence.ValidateID("op_id", m.GetOpId())); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	res, err := h.s.apply(ctx, state.Command{Op: state.OpWrite, Name: m.GetResource(), Token: fence.Token(m.GetToken()), Value: m.GetValue(), OpID: m.GetOpId()})
	if err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	if res.Resource == nil {
		return nil, h.s.connectError(ctx, proc, errors.New("write applied without a resource state"))
	}
	return connect.NewResponse(&fencev1.WriteResponse{State: resourceToProto(res.Resource), Replayed: res.Replayed}), nil
}

func (h resourceService) Add(ctx context.Context, req *connect.Request[fencev1.AddRequest]) (*connect.Response[fencev1.AddResponse], error) {
	const proc = fencev1connect.ResourceServiceAddProcedure
	m := req.Msg
	if err := firstErr(fence.ValidateName("resource", m.GetResource()), fence.ValidateToken(fence.Token(m.GetToken())),
		fence.ValidateID("op_id", m.GetOpId())); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	res, err := h.s.apply(ctx, state.Command{Op: state.OpAdd, Name: m.GetResource(), Token: fence.Token(m.GetToken()), Delta: m.GetDelta(), OpID: m.GetOpId()})
	if err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	if res.Resource == nil {
		return nil, h.s.connectError(ctx, proc, errors.New("add applied without a resource state"))
	}
	return connect.NewResponse(&fencev1.AddResponse{State: resourceToProto(res.Resource), Value: res.AddValue, Replayed: res.Replayed}), nil
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
	const proc = fencev1connect.ResourceServiceDeleteProcedure
	m := req.Msg
	if err := firstErr(fence.ValidateName("resource", m.GetResource()), fence.ValidateToken(fence.Token(m.GetToken())),
		fence.ValidateID("op_id", m.GetOpId())); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	res, err := h.s.apply(ctx, state.Command{Op: state.OpDelete, Name: m.GetResource(), Token: fence.Token(m.GetToken()), OpID: m.GetOpId()})
	if err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	if res.Resource == nil {
		return nil, h.s.connectError(ctx, proc, errors.New("delete applied without a resource state"))
	}
	return connect.NewResponse(&fencev1.DeleteResponse{State: resourceToProto(res.Resource), Replayed: res.Replayed}), nil
}
