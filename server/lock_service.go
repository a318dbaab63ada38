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

// lockService implements fencev1connect.LockServiceHandler.
type lockService struct{ s *Server }

var _ fencev1connect.LockServiceHandler = lockService{}

func (h lockService) Acquire(ctx context.Context, req *connect.Request[fencev1.AcquireRequest]) (*connect.Response[fencev1.AcquireResponse], error) {
	const proc = fencev1connect.LockServiceAcquireProcedure
	// The reply's write deadline starts when it is ready (writes.go):
	// Connect writes it after this returns.
	defer replyReady(ctx)
	m := req.Msg
	ttl, terr := requiredTTL(m.GetTtl(), h.s.cfg.MaxTTL)
	wait, werr := optionalDuration("wait", m.GetWait(), fence.MaxWait)
	delay, derr := optionalDuration("lock_delay", m.GetLockDelay(), fence.MaxLockDelay)
	if err := firstErr(fence.ValidateName("name", m.GetName()), fence.ValidateOwner(m.GetOwner()), terr, werr, derr,
		fence.ValidateID("request_id", m.GetRequestId())); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, wait, cancel = boundWait(ctx, wait)
		defer cancel()
	}
	res, err := h.s.apply(ctx, state.Command{
		Op: state.OpAcquire, Name: m.GetName(), Owner: m.GetOwner(), TTL: ttl, Wait: wait,
		LockDelay: delay, RequestID: m.GetRequestId(),
	})
	if err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	if res.Lease == nil {
		return nil, h.s.connectError(ctx, proc, errors.New("acquire applied without a lease"))
	}
	return connect.NewResponse(&fencev1.AcquireResponse{Lease: leaseToProto(res.Lease)}), nil
}

func (h lockService) Renew(ctx context.Context, req *connect.Request[fencev1.RenewRequest]) (*connect.Response[fencev1.RenewResponse], error) {
	const proc = fencev1connect.LockServiceRenewProcedure
	m := req.Msg
	ttl, terr := optionalTTL(m.GetTtl(), h.s.cfg.MaxTTL)
	if err := firstErr(fence.ValidateName("name", m.GetName()), fence.ValidateToken(fence.Token(m.GetToken())), terr); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	res, err := h.s.apply(ctx, state.Command{Op: state.OpRenew, Name: m.GetName(), Token: fence.Token(m.GetToken()), TTL: ttl})
	if err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	if res.Lease == nil {
		return nil, h.s.connectError(ctx, proc, errors.New("renew applied without a lease"))
	}
	return connect.NewResponse(&fencev1.RenewResponse{Lease: leaseToProto(res.Lease)}), nil
}

func (h lockService) Release(ctx context.Context, req *connect.Request[fencev1.ReleaseRequest]) (*connect.Response[fencev1.ReleaseResponse], error) {
	const proc = fencev1connect.LockServiceReleaseProcedure
	m := req.Msg
	if err := firstErr(fence.ValidateName("name", m.GetName()), fence.ValidateToken(fence.Token(m.GetToken()))); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	if _, err := h.s.apply(ctx, state.Command{Op: state.OpRelease, Name: m.GetName(), Token: fence.Token(m.GetToken())}); err != nil {
		return nil, h.s.connectError(ctx, proc, err)
	}
	return connect.NewResponse(&fencev1.ReleaseResponse{}), nil
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
