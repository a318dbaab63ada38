package server

import (
	"context"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus collectors, in a registry of its own
// (several servers may live in one process, e.g. in tests).
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	apply    prometheus.Histogram
	// exhausted counts RESOURCE_EXHAUSTED refusals by limit (the config
	// field: max_waiters_per_lock, max_ops, ...).
	exhausted *prometheus.CounterVec
	// streamRequests counts the messages of SessionService.Stream by op.
	streamRequests *prometheus.CounterVec
	// authRefusals counts authentication and permission refusals by reason.
	authRefusals *prometheus.CounterVec
	// watchCuts counts watches cut, by reason (behind, send, state: watch.go).
	watchCuts *prometheus.CounterVec
	// watchRefusals counts watches refused by their budget, by limit
	// (watch.go).
	watchRefusals *prometheus.CounterVec
}

func newMetrics(conns *connCount, streams, watches *atomic.Int64, replies *replyBudget, extra []prometheus.Collector) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fence_requests_total", Help: "API requests by procedure and Connect code.",
		}, []string{"procedure", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fence_request_duration_seconds", Help: "API request latency by procedure and Connect code.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"procedure", "code"}),
		apply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fence_raft_apply_duration_seconds", Help: "Time from proposing a command to its applied result (commit, fsync, apply); on a node that forwards to its leader, the forwarded call's round trip.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	m.exhausted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fence_resource_exhausted_total", Help: "Requests refused with RESOURCE_EXHAUSTED, by the limit reached (its config field).",
	}, []string{"limit"})
	m.streamRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fence_stream_requests_total", Help: "Requests received on SessionService.Stream streams, by op (none: a message without one).",
	}, []string{"op"})
	m.authRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fence_auth_refusals_total", Help: "Requests refused UNAUTHENTICATED or PERMISSION_DENIED, by reason (no_credentials, malformed, unknown_token, revoked_token, expired_token, permission, ownership).",
	}, []string{"reason"})
	m.watchCuts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fence_watch_cut_total", Help: "Watches cut by the server, by reason: behind (it read more slowly than changes came and the ring of --watch-history moved past it), send (an event was not written within --write-timeout), state (a state was not written within --write-timeout plus 1 s a page).",
	}, []string{"reason"})
	for _, r := range []string{"behind", "send", "state"} {
		m.watchCuts.WithLabelValues(r)
	}
	m.watchRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fence_watches_refused_total", Help: "Watches refused RESOURCE_EXHAUSTED, by the bound they met: max_watches (--max-watches) or max_watches_per_principal (--max-watches-per-principal).",
	}, []string{"limit"})
	for _, l := range []string{"max_watches", "max_watches_per_principal"} {
		m.watchRefusals.WithLabelValues(l)
	}
	m.reg.MustRegister(m.requests, m.latency, m.apply, m.exhausted, m.streamRequests, m.authRefusals, m.watchCuts, m.watchRefusals,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fence_watchers", Help: "Open watches (LockService.Watch and GET /v1/watch; at most --max-watches)."},
			func() float64 { return float64(watches.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fence_streams", Help: "Open SessionService.Stream streams (at most --max-streams)."},
			func() float64 { return float64(streams.Load()) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fence_http_connections", Help: "Open client connections (at most --max-conns)."},
			func() float64 { return float64(conns.open.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fence_http_connections_evicted_total", Help: "Client connections that had carried no request closed to give their slot of --max-conns to a newcomer."},
			func() float64 { return float64(conns.evicted.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fence_http_connections_unproven_closed_total", Help: "Client connections closed because no request came on them within the header timeout."},
			func() float64 { return float64(conns.expired.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fence_http_reply_bytes_held", Help: "Bytes of large replies (Read, List) held until written, all connections (at most --max-reply-bytes)."},
			func() float64 { used, _, _ := replies.state(); return float64(used) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fence_http_replies_waiting", Help: "Large replies waiting for room in their connection's or the server's reply budget."},
			func() float64 { _, _, waiting := replies.state(); return float64(waiting) }),
	)
	m.reg.MustRegister(extra...)
	return m
}

// interceptor counts and times every call: a unary one when it is
// answered, a SessionService.Stream when it ends (its messages are counted
// by fence_stream_requests_total).
func (m *metrics) interceptor() connect.Interceptor { return callMetrics{m} }

type callMetrics struct{ m *metrics }

func (c callMetrics) observe(proc string, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	c.m.requests.WithLabelValues(proc, code).Inc()
	c.m.latency.WithLabelValues(proc, code).Observe(time.Since(start).Seconds())
}

func (c callMetrics) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		res, err := next(ctx, req)
		c.observe(req.Spec().Procedure, start, err)
		return res, err
	}
}

func (c callMetrics) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c callMetrics) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		c.observe(conn.Spec().Procedure, start, err)
		return err
	}
}
