package server

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/state"
)

// The operations of the API, each as the validated fence request its
// proto request makes and the call that asks the Service (Server.svc) and
// makes the proto reply of its answer. The unary handlers
// (lock_service.go, resource_service.go, session_service.go) and
// SessionService.Stream (stream.go) share them, so a request is checked
// the same way whichever path it takes: each proto request becomes its
// fence request (convert.go) and is judged by its Validate, with the
// checks only the wire can make (validate.go) in their fields' places,
// before the Service is called; a bad field is an *fence.InvalidError
// naming the proto field and its bound. The Service (the local node, or
// the leader forwarder) is never asked to judge a request the server can
// refuse.

// binding binds a request to a session (session 0: none): from a unary
// request's SessionRef, or on a stream from the stream's session and the
// message's seq and ack.
type binding struct{ session, seq, ack uint64 }

func (b binding) ref() fence.SessionRef {
	return fence.SessionRef{ID: b.session, Seq: b.seq, Ack: b.ack}
}

// refBinding checks a unary request's SessionRef (absent: no session).
// seq and ack need a session; ack is at most seq when seq is set (ack is
// the lowest seq not yet answered, and this one is not).
func refBinding(ref *fencev1.SessionRef) (binding, error) {
	if ref == nil {
		return binding{}, nil
	}
	b := binding{session: ref.GetId(), seq: ref.GetSeq(), ack: ref.GetAck()}
	return b, checkBinding(b, "session.id", "session.ack")
}

// checkBinding: seq or ack without a session, or ack past seq, is refused
// naming sessionField or ackField.
func checkBinding(b binding, sessionField, ackField string) error {
	return b.ref().CheckAs(sessionField, ackField)
}

// sessionRefBinding binds a unary KeepAlive or Close to its session, with
// the seq and ack of its session_ref (a stream's op forwarded as a unary
// call), whose id, when set, must be the session.
func sessionRefBinding(session uint64, ref *fencev1.SessionRef) (binding, error) {
	b := binding{session: session, seq: ref.GetSeq(), ack: ref.GetAck()}
	if id := ref.GetId(); id != 0 && id != session {
		return b, fence.Invalid("session_ref.id", fmt.Sprintf("0 or session (%d)", session), fmt.Sprint(id))
	}
	return b, checkBinding(b, "session", "session_ref.ack")
}

// call is one validated request ready to run: it asks the Service and
// makes the reply. replayed reports a saved result (of a request_id, op_id
// or session seq), a refusal's included.
type call[Res any] func(ctx context.Context) (out *Res, replayed bool, err error)

// mutation times a call that proposes (fence_raft_apply_duration_seconds):
// when the Service answered (a reply or a refusal), unless timed is false.
func mutation[Res any](s *Server, timed bool, do call[Res]) call[Res] {
	return func(ctx context.Context) (*Res, bool, error) {
		start := time.Now()
		out, replayed, err := do(ctx)
		if timed && (err == nil || fence.ReasonOf(err) != "") {
			s.metrics.apply.Observe(time.Since(start).Seconds())
		}
		return out, replayed, err
	}
}

// acquireCall checks an acquire (fence.AcquireRequest.Validate, with the
// wire's checks: a session-bound acquire that gives a ttl is refused
// however the ttl is written).
func (s *Server) acquireCall(m *fencev1.AcquireRequest, b binding) (call[fencev1.AcquireResponse], error) {
	l := s.limits()
	req, wire := acquireRequest(m, b, l.MaxTTL)
	if err := req.Validate(l, wire...); err != nil {
		return nil, err
	}
	// A waiting acquire is not timed: its wait is not the apply's.
	return mutation(s, req.Wait == 0, func(ctx context.Context) (*fencev1.AcquireResponse, bool, error) {
		req := req
		if req.Wait > 0 {
			// Bounded by boundWait: the wait fits the deadline of ctx
			// and the call ends a margin after the wait.
			var cancel context.CancelFunc
			ctx, req.Wait, cancel = boundWait(ctx, req.Wait)
			defer cancel()
		}
		start := time.Now()
		g, err := s.svc.Acquire(ctx, req)
		if err != nil {
			return nil, g.Replayed, err
		}
		s.activity.acquired(time.Since(start))
		return &fencev1.AcquireResponse{Lease: leaseToProto(&g.Lease), Replayed: g.Replayed}, g.Replayed, nil
	}), nil
}

func (s *Server) renewCall(m *fencev1.RenewRequest, b binding) (call[fencev1.RenewResponse], error) {
	l := s.limits()
	req, wire := renewRequest(m, b, l.MaxTTL)
	if err := req.Validate(l, wire...); err != nil {
		return nil, err
	}
	return mutation(s, true, func(ctx context.Context) (*fencev1.RenewResponse, bool, error) {
		g, err := s.svc.Renew(ctx, req)
		if err != nil {
			return nil, g.Replayed, err
		}
		return &fencev1.RenewResponse{Lease: leaseToProto(&g.Lease), Replayed: g.Replayed, Session: sessionToProto(g.Session)}, g.Replayed, nil
	}), nil
}

func (s *Server) releaseCall(m *fencev1.ReleaseRequest, b binding) (call[fencev1.ReleaseResponse], error) {
	req, wire := releaseRequest(m, b)
	if err := req.Validate(s.limits(), wire...); err != nil {
		return nil, err
	}
	return mutation(s, true, func(ctx context.Context) (*fencev1.ReleaseResponse, bool, error) {
		r, err := s.svc.Release(ctx, req)
		if err != nil {
			return nil, r.Replayed, err
		}
		return &fencev1.ReleaseResponse{Replayed: r.Replayed}, r.Replayed, nil
	}), nil
}

func (s *Server) writeCall(m *fencev1.WriteRequest, b binding) (call[fencev1.WriteResponse], error) {
	value, err := writeValue(m)
	if err != nil {
		return nil, err
	}
	req, wire := writeRequest(m, value, b)
	if err := req.Validate(s.limits(), wire...); err != nil {
		return nil, err
	}
	return mutation(s, true, func(ctx context.Context) (*fencev1.WriteResponse, bool, error) {
		w, err := s.svc.Write(ctx, req)
		if err != nil {
			return nil, w.Replayed, err
		}
		return &fencev1.WriteResponse{State: resourceToProto(&w.State), Replayed: w.Replayed}, w.Replayed, nil
	}), nil
}

func (s *Server) addCall(m *fencev1.AddRequest, b binding) (call[fencev1.AddResponse], error) {
	req, wire := addRequest(m, b)
	if err := req.Validate(s.limits(), wire...); err != nil {
		return nil, err
	}
	return mutation(s, true, func(ctx context.Context) (*fencev1.AddResponse, bool, error) {
		w, err := s.svc.Add(ctx, req)
		if err != nil {
			return nil, w.Replayed, err
		}
		return &fencev1.AddResponse{State: resourceToProto(&w.State), Value: w.Value, Replayed: w.Replayed}, w.Replayed, nil
	}), nil
}

func (s *Server) deleteCall(m *fencev1.DeleteRequest, b binding) (call[fencev1.DeleteResponse], error) {
	req, wire := deleteRequest(m, b)
	if err := req.Validate(s.limits(), wire...); err != nil {
		return nil, err
	}
	return mutation(s, true, func(ctx context.Context) (*fencev1.DeleteResponse, bool, error) {
		w, err := s.svc.Delete(ctx, req)
		if err != nil {
			return nil, w.Replayed, err
		}
		return &fencev1.DeleteResponse{State: resourceToProto(&w.State), Replayed: w.Replayed}, w.Replayed, nil
	}), nil
}

// openCall checks an open: ttl required.
func (s *Server) openCall(m *fencev1.OpenSessionRequest) (call[fencev1.OpenSessionResponse], error) {
	l := s.limits()
	req, wire := openRequest(m, l.MaxTTL)
	if err := req.Validate(l, wire...); err != nil {
		return nil, err
	}
	return mutation(s, true, func(ctx context.Context) (*fencev1.OpenSessionResponse, bool, error) {
		g, err := s.svc.OpenSession(ctx, req)
		if err != nil {
			return nil, g.Replayed, err
		}
		return &fencev1.OpenSessionResponse{Session: sessionToProto(&g.Session), Replayed: g.Replayed}, g.Replayed, nil
	}), nil
}

// keepAliveCall checks a keepalive of session (the request's, or on a
// stream the stream's): ttl absent keeps the session's TTL.
func (s *Server) keepAliveCall(m *fencev1.KeepAliveRequest, b binding) (call[fencev1.KeepAliveResponse], error) {
	l := s.limits()
	req, wire := keepAliveRequest(m, b, l.MaxTTL)
	if err := req.Validate(l, wire...); err != nil {
		return nil, err
	}
	return mutation(s, true, func(ctx context.Context) (*fencev1.KeepAliveResponse, bool, error) {
		g, err := s.svc.KeepAlive(ctx, req)
		if err != nil {
			return nil, g.Replayed, err
		}
		return &fencev1.KeepAliveResponse{Session: sessionToProto(&g.Session), Replayed: g.Replayed, Follower: !s.deps.Node.IsLeader()}, g.Replayed, nil
	}), nil
}

func (s *Server) closeCall(b binding) (call[fencev1.CloseSessionResponse], error) {
	req, wire := closeRequest(b)
	if err := req.Validate(s.limits(), wire...); err != nil {
		return nil, err
	}
	return mutation(s, true, func(ctx context.Context) (*fencev1.CloseSessionResponse, bool, error) {
		r, err := s.svc.CloseSession(ctx, req)
		if err != nil {
			return nil, r.Replayed, err
		}
		return &fencev1.CloseSessionResponse{Replayed: r.Replayed}, r.Replayed, nil
	}), nil
}

// The reads: linearizable, nothing proposed; seq and ack mean nothing to
// them.

func (s *Server) getCall(name string) (call[fencev1.GetResponse], error) {
	if err := fence.ValidateName("name", name); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (*fencev1.GetResponse, bool, error) {
		li, err := s.svc.Get(ctx, name)
		if err != nil {
			return nil, false, err
		}
		return &fencev1.GetResponse{Lock: lockToProto(li)}, false, nil
	}, nil
}

func (s *Server) readCall(resource string) (call[fencev1.ReadResponse], error) {
	if err := fence.ValidateName("resource", resource); err != nil {
		return nil, err
	}
	// A value of up to 1 MiB: the reply holds its cost in the reply
	// budgets until it is written, and the largest value's while it is
	// made (reply_budget.go).
	return budgeted(func() int64 { return s.readBuild(resource) }, nil, func(ctx context.Context) (*fencev1.ReadResponse, bool, error) {
		rs, err := s.svc.Read(ctx, resource)
		if err != nil {
			return nil, false, err
		}
		return &fencev1.ReadResponse{State: resourceToProto(&rs)}, false, nil
	}), nil
}

// readBuild is what a Read of resource reserves while it is made: its
// reply's cost with the value's size in the local replica now (read
// without copying the value; 0 for a small reply: it never waits for
// other replies being made), or the largest value's without one. A write
// that grows the value between this and the Read's own (linearizable)
// read makes that one reply over its reservation; it then holds its real
// cost like any other.
func (s *Server) readBuild(resource string) int64 {
	if s.deps.Auth == nil {
		return firstGuess
	}
	var n int
	s.deps.Auth.ReadAuth(func(m *state.Machine) { n = m.ResourceValueSize(resource) })
	c := replyCostFactor * int64(n+len(resource)+readReplyOverhead)
	if c < replySmall {
		return 0
	}
	return c
}

// readReplyOverhead: a Read reply's proto bytes besides its value and
// resource name (its token, version, flags and field tags), at most.
const readReplyOverhead = 64

func (s *Server) listCall(m *fencev1.ListRequest) (call[fencev1.ListResponse], error) {
	req, wire := listRequest(m)
	if err := req.Validate(s.limits(), wire...); err != nil {
		return nil, err
	}
	// A page of up to 10,000 locks: budgeted as a Read, made holding its
	// page size's cost (reply_budget.go).
	build := int64(req.Limit) * listLockCost
	return budgeted(func() int64 { return build }, listCost, func(ctx context.Context) (*fencev1.ListResponse, bool, error) {
		page, err := s.svc.List(ctx, req)
		if err != nil {
			return nil, false, err
		}
		out := &fencev1.ListResponse{Locks: make([]*fencev1.LockInfo, 0, len(page.Locks)), NextPageToken: encodePageToken(page.Next)}
		for _, li := range page.Locks {
			out.Locks = append(out.Locks, lockToProto(li))
		}
		return out, false, nil
	}), nil
}

// listCost is what a List reply holds besides its encoding: its locks'
// Go values.
func listCost(r *fencev1.ListResponse) int64 { return int64(len(r.GetLocks())) * listLockHeap }

// unary answers one unary call: do (or verr, its refusal) run, every error
// mapped as the call proc's.
func unary[Res any](ctx context.Context, s *Server, proc string, do call[Res], verr error) (*connect.Response[Res], error) {
	if verr != nil {
		return nil, s.connectError(ctx, proc, verr)
	}
	out, replayed, err := do(ctx)
	if err != nil {
		if replayed && fence.ReasonOf(err) != "" {
			// The saved refusal of a retried seq: ErrorDetail.replayed.
			err = apierr.MarkReplayed(err)
		}
		return nil, s.connectError(ctx, proc, err)
	}
	return connect.NewResponse(out), nil
}

// withRef checks a unary request's SessionRef before the request's own
// fields and builds the call bound to it.
func withRef[Res any](ref *fencev1.SessionRef, build func(binding) (call[Res], error)) (call[Res], error) {
	b, berr := refBinding(ref)
	if berr != nil {
		// First: a broken ref also breaks what the op's checks assume
		// (an acquire with session {id 0, seq 1} was refused naming
		// ttl, as if it were meant to be standalone).
		return nil, berr
	}
	return build(b)
}

// limits are the bounds requests are judged by: those of the rules
// recorded in the log (the largest TTL and lock-delay), which is what the
// leader's state machine judges by. The server's own --max-ttl and
// --max-lock-delay only propose rules (when this node leads): a follower
// started with other values must neither refuse what the log allows (a
// retried request_id would then be refused although it was granted) nor
// pass what it does not. Before any rules are known, Config.MaxTTL.
func (s *Server) limits() fence.Limits {
	l := s.deps.Node.Limits()
	if l.MaxTTL <= 0 {
		l.MaxTTL = s.cfg.MaxTTL
	}
	return l
}
