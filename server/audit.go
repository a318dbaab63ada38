package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/cluster/clusterapi"
)

// The audit log: one structured event ("audit") for every admin action
// and every authentication or permission refusal, with the principal, the
// method, the name and the reason — never a secret. Refusals are limited
// to auditBurst events per second per server (a flood of bad requests
// cannot flood the log); the number left out is logged with the next event
// that is written. Admin actions are never left out. Every refusal is
// counted in fence_auth_refusals_total by reason, limited or not.

const auditBurst = 20

type auditLimiter struct {
	mu      sync.Mutex
	second  int64
	n       int
	dropped int
}

// allow reports whether one more refusal may be logged now, and how many
// were left out before it.
func (l *auditLimiter) allow(now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sec := now.Unix(); sec != l.second {
		l.second, l.n = sec, 0
	}
	if l.n >= auditBurst {
		l.dropped++
		return false, 0
	}
	l.n++
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// authReason is the metric label of an auth refusal.
func authReason(err error) string {
	var un *fence.UnauthenticatedError
	var pd *fence.PermissionDeniedError
	switch {
	case errors.As(err, &un):
		for _, r := range []string{"no credentials", "malformed", "unknown token", "revoked token", "expired token"} {
			if strings.HasPrefix(un.Reason, r) {
				return strings.ReplaceAll(r, " ", "_")
			}
		}
		return "unauthenticated"
	case errors.As(err, &pd):
		switch pd.What {
		case "lease", "session", "request_id":
			return "ownership"
		}
		return "permission"
	}
	return "other"
}

// audit logs and counts an auth refusal of method by principal on name.
func (s *Server) audit(ctx context.Context, method, principal, name string, err error) {
	reason := authReason(err)
	s.metrics.authRefusals.WithLabelValues(reason).Inc()
	ok, dropped := s.auditLimit.allow(time.Now())
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("event", "refused"), slog.String("method", method), slog.String("principal", principal),
		slog.String("name", name), slog.String("reason", reason), slog.String("err", err.Error())}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("left_out_before", dropped))
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "audit", withPeerNode(ctx, attrs)...)
}

// auditRefusal audits err if it is an auth refusal (one the node made:
// another principal's lease or session).
func (s *Server) auditRefusal(ctx context.Context, method, name string, err error) {
	if errors.Is(err, fence.ErrPermissionDenied) || errors.Is(err, fence.ErrUnauthenticated) {
		p, _ := fence.PrincipalFrom(ctx)
		s.audit(ctx, method, p.Name, name, err)
	}
}

// auditAction logs an admin action (never left out).
func (s *Server) auditAction(ctx context.Context, method, principal, name string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("event", "admin"), slog.String("method", method), slog.String("principal", principal),
		slog.String("name", name)}, attrs...)
	s.log.LogAttrs(ctx, slog.LevelInfo, "audit", withPeerNode(ctx, attrs)...)
}

// withPeerNode adds, to a call that came through the peer port under peer
// TLS, the node its certificate names (peer_node): a forwarded principal
// is recorded with the member that vouched for it.
func withPeerNode(ctx context.Context, attrs []slog.Attr) []slog.Attr {
	if id := clusterapi.PeerNodeFrom(ctx); id != "" {
		attrs = append(attrs, slog.String("peer_node", id))
	}
	return attrs
}
