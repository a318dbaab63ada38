package server

import (
	"context"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// sessionService implements fencev1connect.SessionServiceHandler: Open,
// KeepAlive and Close as unary calls (curl-friendly, like every other
// call), and Stream (stream.go).
type sessionService struct{ s *Server }

var _ fencev1connect.SessionServiceHandler = sessionService{}

// Open starts a session: ttl must be set, in [fence.MinTTL, the largest
// TTL]; a retry with the same request_id gets the same session.
func (h sessionService) Open(ctx context.Context, req *connect.Request[fencev1.OpenSessionRequest]) (*connect.Response[fencev1.OpenSessionResponse], error) {
	do, err := h.s.openCall(req.Msg)
	return unary(ctx, h.s, fencev1connect.SessionServiceOpenProcedure, do, err)
}

// KeepAlive extends a live session to now + its TTL (or the ttl given,
// which then becomes its TTL); an ended one is SESSION_EXPIRED.
func (h sessionService) KeepAlive(ctx context.Context, req *connect.Request[fencev1.KeepAliveRequest]) (*connect.Response[fencev1.KeepAliveResponse], error) {
	m := req.Msg
	do, err := withBinding(m.GetSession(), m.GetSessionRef(), func(b binding) (call[fencev1.KeepAliveResponse], error) { return h.s.keepAliveCall(m, b) })
	return unary(ctx, h.s, fencev1connect.SessionServiceKeepAliveProcedure, do, err)
}

// Close ends a session: its leases are released and handed to their next
// waiters, its waits end. An ended one is SESSION_EXPIRED.
func (h sessionService) Close(ctx context.Context, req *connect.Request[fencev1.CloseSessionRequest]) (*connect.Response[fencev1.CloseSessionResponse], error) {
	m := req.Msg
	do, err := withBinding(m.GetSession(), m.GetSessionRef(), h.s.closeCall)
	return unary(ctx, h.s, fencev1connect.SessionServiceCloseProcedure, do, err)
}

// Stream serves one session's requests over one bidi stream (stream.go).
func (h sessionService) Stream(ctx context.Context, st *connect.BidiStream[fencev1.SessionRequest, fencev1.SessionReply]) error {
	return h.s.serveStream(ctx, st)
}

// withBinding checks a KeepAlive's or Close's session_ref and builds the
// call bound to it.
func withBinding[Res any](session uint64, ref *fencev1.SessionRef, build func(binding) (call[Res], error)) (call[Res], error) {
	b, err := sessionRefBinding(session, ref)
	if err != nil {
		return nil, err
	}
	return build(b)
}
