package server

import (
	"context"
	"log/slog"

	"github.com/fenceworks/fence"
)

// logRefusal logs a refused request at debug level: the procedure, the
// reason (BUSY, STALE_TOKEN, ..., or NOT_LEADER) and the message with its
// facts. Refusals are the API working as designed, so they are not logged
// at info; --log-level debug shows them. Nothing is built unless debug is
// enabled (refusals can be frequent: a busy lock polled by many clients).
func (s *Server) logRefusal(ctx context.Context, procedure string, err error) {
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	reason := string(fence.ReasonOf(err))
	switch {
	case reason != "":
	case is(err, s.deps.Errors.NotLeader):
		reason = "NOT_LEADER"
	default:
		reason = "UNAVAILABLE"
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "request refused",
		slog.String("procedure", procedure), slog.String("reason", reason), slog.String("err", err.Error()))
}
