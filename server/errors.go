package server

import (
	"context"
	"errors"
	"strings"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
)

// errShuttingDown answers requests cut short by a shutdown.
var errShuttingDown = errors.New("server is shutting down")

// connectError maps an error from validation or the Service to the
// *connect.Error the client sees. A refusal keeps its typed detail.
// Node-level failures (not leader, closed, shutting down) are Unavailable
// so clients retry elsewhere; so is an outcome the node does not know
// (ErrorKinds.UnknownOutcome: the command may yet be applied), so clients
// retry with the same op_id or request_id and get the first outcome; so is
// any other error that matches fence.ErrUnavailable (what a Service other
// than the local node, e.g. the leader forwarder, returns when the outcome
// is unknown); unexpected errors are logged and Internal.
func (s *Server) connectError(ctx context.Context, procedure string, err error) error {
	switch {
	case fence.ReasonOf(err) != "":
		s.countRefusal(err)
		s.activity.refused(string(fence.ReasonOf(err)))
		s.logRefusal(ctx, procedure, err)
		return apierr.ToConnect(err)
	case is(err, s.deps.Errors.UnknownOutcome):
		s.log.Warn("outcome unknown; the client may retry with the same id", "procedure", procedure, "err", err)
		return connect.NewError(connect.CodeUnavailable, err)
	case is(err, s.deps.Errors.NotLeader):
		s.logRefusal(ctx, procedure, err)
		return connect.NewError(connect.CodeUnavailable, err)
	case is(err, s.deps.Errors.Closed) || s.draining():
		return connect.NewError(connect.CodeUnavailable, errShuttingDown)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apierr.ToConnect(err)
	case errors.Is(err, fence.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	}
	s.log.Error("request failed", "procedure", procedure, "err", err)
	return connect.NewError(connect.CodeInternal, err)
}

// countRefusal counts a RESOURCE_EXHAUSTED refusal by its limit.
func (s *Server) countRefusal(err error) {
	var limit *fence.ResourceExhaustedError
	if errors.As(err, &limit) {
		s.metrics.exhausted.WithLabelValues(limitLabel(limit.Limit)).Inc()
	}
}

// limitLabel is the metric label of a limit: the config field it names
// (`waiters on lock "x" (config.max_waiters_per_lock)` is
// "max_waiters_per_lock"), so lock names never become label values;
// "max_backups" for the one-backup-at-a-time limit, which is no config
// field.
func limitLabel(limit string) string {
	if limit == backupsLimit {
		return "max_backups"
	}
	i := strings.LastIndex(limit, "(config.")
	if i < 0 || !strings.HasSuffix(limit, ")") {
		return "other"
	}
	label := limit[i+len("(config.") : len(limit)-1]
	// "(config.max_ids_per_principal or its roles' quota)": the rule's name.
	label, _, _ = strings.Cut(label, " ")
	return label
}
