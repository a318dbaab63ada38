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
	cmd, err := h.s.openCommand(req.Msg)
	return unary(ctx, h.s, fencev1connect.SessionServiceOpenProcedure, cmd, err, openReply)
}

// KeepAlive extends a live session to now + its TTL (or the ttl given,
// which then becomes its TTL); an ended one is SESSION_EXPIRED.
func (h sessionService) KeepAlive(ctx context.Context, req *connect.Request[fencev1.KeepAliveRequest]) (*connect.Response[fencev1.KeepAliveResponse], error) {
	cmd, err := h.s.keepAliveCommand(req.Msg, binding{session: req.Msg.GetSession()})
	return unary(ctx, h.s, fencev1connect.SessionServiceKeepAliveProcedure, cmd, err, keepAliveReply)
}

// Close ends a session: its leases are released and handed to their next
// waiters, its waits end. An ended one is SESSION_EXPIRED.
func (h sessionService) Close(ctx context.Context, req *connect.Request[fencev1.CloseSessionRequest]) (*connect.Response[fencev1.CloseSessionResponse], error) {
	cmd, err := closeCommand(binding{session: req.Msg.GetSession()})
	return unary(ctx, h.s, fencev1connect.SessionServiceCloseProcedure, cmd, err, closeReply)
}

// Stream serves one session's requests over one bidi stream (stream.go).
func (h sessionService) Stream(ctx context.Context, st *connect.BidiStream[fencev1.SessionRequest, fencev1.SessionReply]) error {
	return h.s.serveStream(ctx, st)
}
