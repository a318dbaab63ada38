package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/state"
)

// The mutating operations of the API, each as the validated state.Command
// its request proposes and the reply made of its result. The unary
// handlers (lock_service.go, resource_service.go, session_service.go) and
// SessionService.Stream (stream.go) share them, so a request is checked
// the same way whichever path it takes: every field is validated before
// anything is proposed, and a bad one is an *fence.InvalidError naming the
// field and its bound.

// binding binds a command to a session (session 0: none): from a unary
// request's SessionRef, or on a stream from the stream's session and the
// message's seq and ack.
type binding struct{ session, seq, ack uint64 }

func (b binding) bind(cmd state.Command) state.Command {
	cmd.Session, cmd.Seq, cmd.Ack = b.session, b.seq, b.ack
	return cmd
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
	switch {
	case b.session == 0 && (b.seq != 0 || b.ack != 0):
		return fence.Invalid(sessionField, "set (the id SessionService.Open returned) when seq or ack is", "")
	case b.seq != 0 && b.ack > b.seq:
		return fence.Invalid(ackField, fmt.Sprintf("at most seq (%d): the lowest seq not yet answered", b.seq), fmt.Sprint(b.ack))
	}
	return nil
}

// acquireCommand checks an acquire. A session-bound acquire may leave ttl
// absent (the lease lasts as long as its session; a ttl given is checked
// and then ignored by the machine); a standalone one must set it.
func (s *Server) acquireCommand(m *fencev1.AcquireRequest, b binding) (state.Command, error) {
	ttl, terr := optionalTTL(m.GetTtl(), s.cfg.MaxTTL)
	if b.session == 0 && m.GetTtl() == nil {
		terr = fence.Invalid("ttl", fmt.Sprintf("set (between %s and %s) unless the acquire is bound to a session (session.id)", fence.MinTTL, s.cfg.MaxTTL), "")
	}
	wait, werr := optionalDuration("wait", m.GetWait(), fence.MaxWait)
	delay, derr := optionalDuration("lock_delay", m.GetLockDelay(), fence.MaxLockDelay)
	if err := firstErr(fence.ValidateName("name", m.GetName()), fence.ValidateOwner(m.GetOwner()), terr, werr, derr,
		fence.ValidateID("request_id", m.GetRequestId())); err != nil {
		return state.Command{}, err
	}
	cmd := b.bind(state.Command{
		Op: state.OpAcquire, Name: m.GetName(), Owner: m.GetOwner(), TTL: ttl, Wait: wait,
		LockDelay: delay, RequestID: m.GetRequestId(),
	})
	if cmd.RequestID == "" && cmd.Session != 0 && cmd.Seq != 0 {
		// The id the machine gives it: the node registers its waiter
		// under it, so a retry of the seq (a new attempt of the same
		// request, maybe on another stream while this one still waits)
		// is answered where it waits.
		cmd.RequestID = state.SessionRequestID(cmd.Session, cmd.Seq)
	}
	return cmd, nil
}

func (s *Server) renewCommand(m *fencev1.RenewRequest, b binding) (state.Command, error) {
	ttl, terr := optionalTTL(m.GetTtl(), s.cfg.MaxTTL)
	if err := firstErr(fence.ValidateName("name", m.GetName()), fence.ValidateToken(fence.Token(m.GetToken())), terr); err != nil {
		return state.Command{}, err
	}
	return b.bind(state.Command{Op: state.OpRenew, Name: m.GetName(), Token: fence.Token(m.GetToken()), TTL: ttl}), nil
}

func releaseCommand(m *fencev1.ReleaseRequest, b binding) (state.Command, error) {
	if err := firstErr(fence.ValidateName("name", m.GetName()), fence.ValidateToken(fence.Token(m.GetToken()))); err != nil {
		return state.Command{}, err
	}
	return b.bind(state.Command{Op: state.OpRelease, Name: m.GetName(), Token: fence.Token(m.GetToken())}), nil
}

func writeCommand(m *fencev1.WriteRequest, b binding) (state.Command, error) {
	if err := firstErr(fence.ValidateName("resource", m.GetResource()), fence.ValidateToken(fence.Token(m.GetToken())),
		fence.ValidateValue(m.GetValue()), fence.ValidateID("op_id", m.GetOpId())); err != nil {
		return state.Command{}, err
	}
	return b.bind(state.Command{Op: state.OpWrite, Name: m.GetResource(), Token: fence.Token(m.GetToken()), Value: m.GetValue(), OpID: m.GetOpId()}), nil
}

func addCommand(m *fencev1.AddRequest, b binding) (state.Command, error) {
	if err := firstErr(fence.ValidateName("resource", m.GetResource()), fence.ValidateToken(fence.Token(m.GetToken())),
		fence.ValidateID("op_id", m.GetOpId())); err != nil {
		return state.Command{}, err
	}
	return b.bind(state.Command{Op: state.OpAdd, Name: m.GetResource(), Token: fence.Token(m.GetToken()), Delta: m.GetDelta(), OpID: m.GetOpId()}), nil
}

func deleteCommand(m *fencev1.DeleteRequest, b binding) (state.Command, error) {
	if err := firstErr(fence.ValidateName("resource", m.GetResource()), fence.ValidateToken(fence.Token(m.GetToken())),
		fence.ValidateID("op_id", m.GetOpId())); err != nil {
		return state.Command{}, err
	}
	return b.bind(state.Command{Op: state.OpDelete, Name: m.GetResource(), Token: fence.Token(m.GetToken()), OpID: m.GetOpId()}), nil
}

// openCommand checks an open: ttl in [fence.MinTTL, the largest TTL],
// request_id like any id.
func (s *Server) openCommand(m *fencev1.OpenSessionRequest) (state.Command, error) {
	ttl, terr := requiredTTL(m.GetTtl(), s.cfg.MaxTTL)
	if err := firstErr(terr, fence.ValidateID("request_id", m.GetRequestId())); err != nil {
		return state.Command{}, err
	}
	return state.Command{Op: state.OpSessionOpen, TTL: ttl, RequestID: m.GetRequestId()}, nil
}

// keepAliveCommand checks a keepalive of session (the request's, or on a
// stream the stream's): ttl absent keeps the session's TTL.
func (s *Server) keepAliveCommand(m *fencev1.KeepAliveRequest, b binding) (state.Command, error) {
	ttl, terr := optionalTTL(m.GetTtl(), s.cfg.MaxTTL)
	if err := firstErr(requireSession(b.session), terr); err != nil {
		return state.Command{}, err
	}
	return b.bind(state.Command{Op: state.OpSessionKeepAlive, TTL: ttl}), nil
}

func closeCommand(b binding) (state.Command, error) {
	if err := requireSession(b.session); err != nil {
		return state.Command{}, err
	}
	return b.bind(state.Command{Op: state.OpSessionClose}), nil
}

// requireSession refuses session 0.
func requireSession(id uint64) error {
	if id == 0 {
		return fence.Invalid("session", "set (the id SessionService.Open returned)", "")
	}
	return nil
}

// run proposes cmd. An acquire that waits is bounded by boundWait: its
// wait fits the deadline of ctx and its apply ends a margin after the wait.
func (s *Server) run(ctx context.Context, cmd state.Command) (state.Result, error) {
	if cmd.Op == state.OpAcquire && cmd.Wait > 0 {
		var cancel context.CancelFunc
		ctx, cmd.Wait, cancel = boundWait(ctx, cmd.Wait)
		defer cancel()
	}
	return s.apply(ctx, cmd)
}

// Replies made of a result. A result without what its operation must
// return is an internal error (never a refusal).

func acquireReply(res state.Result) (*fencev1.AcquireResponse, error) {
	if res.Lease == nil {
		return nil, errors.New("acquire applied without a lease")
	}
	return &fencev1.AcquireResponse{Lease: leaseToProto(res.Lease)}, nil
}

func renewReply(res state.Result) (*fencev1.RenewResponse, error) {
	if res.Lease == nil {
		return nil, errors.New("renew applied without a lease")
	}
	return &fencev1.RenewResponse{Lease: leaseToProto(res.Lease)}, nil
}

func releaseReply(state.Result) (*fencev1.ReleaseResponse, error) {
	return &fencev1.ReleaseResponse{}, nil
}

func writeReply(res state.Result) (*fencev1.WriteResponse, error) {
	if res.Resource == nil {
		return nil, errors.New("write applied without a resource state")
	}
	return &fencev1.WriteResponse{State: resourceToProto(res.Resource), Replayed: res.Replayed}, nil
}

func addReply(res state.Result) (*fencev1.AddResponse, error) {
	if res.Resource == nil {
		return nil, errors.New("add applied without a resource state")
	}
	return &fencev1.AddResponse{State: resourceToProto(res.Resource), Value: res.AddValue, Replayed: res.Replayed}, nil
}

func deleteReply(res state.Result) (*fencev1.DeleteResponse, error) {
	if res.Resource == nil {
		return nil, errors.New("delete applied without a resource state")
	}
	return &fencev1.DeleteResponse{State: resourceToProto(res.Resource), Replayed: res.Replayed}, nil
}

func openReply(res state.Result) (*fencev1.OpenSessionResponse, error) {
	if res.Session == nil {
		return nil, errors.New("session open applied without a session")
	}
	return &fencev1.OpenSessionResponse{Session: sessionToProto(res.Session)}, nil
}

func keepAliveReply(res state.Result) (*fencev1.KeepAliveResponse, error) {
	if res.Session == nil {
		return nil, errors.New("keepalive applied without a session")
	}
	return &fencev1.KeepAliveResponse{Session: sessionToProto(res.Session)}, nil
}

func closeReply(state.Result) (*fencev1.CloseSessionResponse, error) {
	return &fencev1.CloseSessionResponse{}, nil
}

// unary answers one mutating unary call: cmd (or verr, its refusal)
// proposed, and the reply made of its result; every error is mapped as
// the call proc's.
func unary[Res any](ctx context.Context, s *Server, proc string, cmd state.Command, verr error,
	reply func(state.Result) (*Res, error)) (*connect.Response[Res], error) {
	if verr != nil {
		return nil, s.connectError(ctx, proc, verr)
	}
	res, err := s.run(ctx, cmd)
	if err != nil {
		return nil, s.connectError(ctx, proc, err)
	}
	out, err := reply(res)
	if err != nil {
		return nil, s.connectError(ctx, proc, err)
	}
	return connect.NewResponse(out), nil
}

// withRef checks a unary request's SessionRef after the request's own
// fields and binds the command to it.
func withRef(ref *fencev1.SessionRef, build func(binding) (state.Command, error)) (state.Command, error) {
	b, berr := refBinding(ref)
	if berr != nil {
		// First: a broken ref also breaks what the op's checks assume
		// (an acquire with session {id 0, seq 1} was refused naming
		// ttl, as if it were meant to be standalone).
		return state.Command{}, berr
	}
	return build(b)
}
