package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/server/ui"
)

// maxRequestBytes bounds a request message: a 1 MiB value (base64 in JSON)
// with room to spare, so an oversized value reaches validation and gets a
// typed refusal naming the field.
const maxRequestBytes = 4 << 20

// compressMinBytes: replies smaller than this are sent uncompressed.
const compressMinBytes = 4 << 10

// http2PingEvery: an HTTP/2 connection silent this long is pinged, and
// closed if the ping is not answered within as long again.
const http2PingEvery = 15 * time.Second

// Server is the Fence API over a fence.Service: its handlers validate
// each request and ask deps.Service; health, readiness and the backup ask
// deps.Node.
type Server struct {
	cfg     Config
	log     *slog.Logger
	deps    Deps
	svc     fence.Service
	metrics *metrics
	handler http.Handler
	json    map[string]jsonCall // plain JSON handlers, by procedure path (jsonhandler.go)
	http    *http.Server

	baseCtx    context.Context // parent of every request context
	cancelBase context.CancelFunc
	drainOnce  sync.Once
	drainC     chan struct{}
	conns      connCount    // client connections (Serve's listener)
	streams    atomic.Int64 // open SessionService.Stream streams
	watches    atomic.Int64 // open watches (watch.go)
	auditLimit auditLimiter // audit.go
	replies    *replyBudget // reply bytes held, all connections (reply_budget.go)
	building   *replyBudget // reply bytes being made, all connections (reply_budget.go)
	// principalReplies: reply bytes held per principal (reply_budget.go).
	principalReplies *principalReplies
	// principalConns counts the connections each principal holds
	// (conn_fair.go).
	principalConns principalCounts
	// principalStreams counts the streams each principal holds
	// (stream_quota.go).
	principalStreams principalCounts
	// principalWatches counts the watches each principal holds (watch.go).
	principalWatches principalCounts
	// workers run session streams' requests (stream_workers.go).
	workers *streamWorkers
	// lean: the lean session ports being served (lean.go).
	lean leanListeners
	// story and activity are the operator view's node-local memory
	// (story.go, activity.go), fed by Deps.Changes and the handlers.
	story    *storyBook
	activity *activityRing
	// fed: the node has caught up since it started, so the changes it
	// applies are news (noteChanges); before, a replay.
	fed atomic.Bool
}

// New builds the handlers over deps. It does not listen; call Serve, or
// mount Handler.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg = cfg.withDefaults()
	if deps.Service == nil || deps.Node == nil {
		return nil, errors.New("server: Deps.Service and Deps.Node are required")
	}
	s := &Server{cfg: cfg, log: cfg.Logger, deps: deps, svc: deps.Service, drainC: make(chan struct{}), replies: newReplyBudget(cfg.MaxReplyBytes, 0), building: newReplyBudget(cfg.MaxReplyBytes, 0), principalReplies: newPrincipalReplies(cfg.MaxReplyBytes)}
	if deps.Auth != nil {
		s.svc = authzService{s: s, inner: deps.Service}
	}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.story, s.activity = newStoryBook(time.Now), newActivityRing(time.Now)
	if deps.Changes != nil {
		deps.Changes(s.noteChanges)
	}
	s.workers = newStreamWorkers(s.baseCtx)
	s.metrics = newMetrics(&s.conns, &s.streams, &s.watches, s.replies, deps.Metrics)

	opts := []connect.HandlerOption{
		connect.WithInterceptors(s.metrics.interceptor()),
		// limitBodies and limitedGzip refuse a larger message first, with
		// invalid_argument naming the limit; this is a backstop.
		connect.WithReadMaxBytes(maxRequestBytes),
		connect.WithCompression("gzip", newLimitedGzip, newGzipCompressor),
		// Replies are small: gzip costs more CPU than it saves (it was
		// 18% of CPU at 64 clients). Large Read replies still compress.
		connect.WithCompressMinBytes(compressMinBytes),
	}
	opts = append(opts, jsonCodecs()...)
	// Plain JSON calls are answered by serveJSON (jsonhandler.go), one
	// handler per unary procedure of the table.
	s.json = s.jsonCalls()
	if err := checkJSONCalls(s.json); err != nil {
		return nil, err
	}
	lockPath, lockHandler := fencev1connect.NewLockServiceHandler(lockService{s}, opts...)
	resPath, resHandler := fencev1connect.NewResourceServiceHandler(resourceService{s}, opts...)
	sessPath, sessHandler := fencev1connect.NewSessionServiceHandler(sessionService{s}, opts...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /v1/keys", s.keys)
	mux.HandleFunc("GET /v1/watch", s.sseWatch)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	// SessionService.Stream has limits of its own (stream_http.go).
	// refusalReasons, outermost, gives every refusal its reason and
	// facts, also those made in front of Connect (jsonerror.go).
	s.handler = refusalReasons(serveStreams(sessHandler, limitWrites(s.holdReplies(limitBodies(s.apiFront(apiRouter{
		{prefix: lockPath, h: lockHandler},
		{prefix: resPath, h: resHandler},
		{prefix: sessPath, h: sessHandler},
		s.clusterRoute(opts),
		s.maintenanceRoute(opts),
		s.authRoute(opts),
		s.keyRoute(opts),
		s.operatorRoute(opts),
		s.healthRoute(opts), // grpc.health.v1 (grpchealth.go)
		reflectRoute(opts),  // gRPC server reflection (reflect.go)
		{prefix: "/", h: uiOr(ui.Handler(cfg.UI), mux)},
	}))), cfg.WriteTimeout), cfg.WriteTimeout))
	s.handler = s.withCredentials(s.handler)
	if deps.Middleware != nil {
		s.handler = deps.Middleware(s.handler)
	}
	s.handler = s.proveConns(s.handler)

	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	protocols.SetHTTP2(true) // over TLS (Config.TLS), by ALPN
	s.http = &http.Server{
		Handler:   s.peerGate(s.handler),
		Protocols: protocols,
		// A client that vanished without closing its connection (a
		// crashed host, a partition) is noticed by a ping that goes
		// unanswered: its streams end and their waits are withdrawn.
		HTTP2:             &http.HTTP2Config{SendPingTimeout: http2PingEvery, PingTimeout: http2PingEvery},
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return s.baseCtx },
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return withFairConn(markPeerConn(ctx, c), c) },
		ErrorLog:          httpErrorLog(cfg.Logger),
	}
	return s, nil
}

// Handler is the API, /healthz, /readyz and /metrics on one mux (for
// httptest and for embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves HTTP/1.1 and unencrypted HTTP/2 on ln until Shutdown or
// Close; it then returns nil. With Config.TLS it serves TLS instead:
// HTTP/2 (ALPN h2) and HTTP/1.1 over it.
// At most cfg.MaxConns connections are open at once; a newcomer takes the
// slot of the oldest connection no client request has come on yet
// (conn_fair.go).
func (s *Server) Serve(ln net.Listener) error {
	ln = newFairListener(ln, s.cfg.MaxConns, s.cfg.UnprovenTimeout, &s.conns)
	if s.cfg.TLS != nil {
		ln = tlsListener{ln, s.cfg.TLS}
	}
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Drain starts a shutdown: waiting acquires are cancelled (their clients
// get Unavailable and their waits are withdrawn from the queue), readiness
// turns false and calls cut short answer "server is shutting down". The
// server still serves until Shutdown or Close.
func (s *Server) Drain() {
	s.drainOnce.Do(func() { close(s.drainC) })
	s.cancelBase()
}

// ServePeers serves the same handler on ln without the client connection
// cap (the API as other nodes reach it on the raft port), until Shutdown
// or Close; it then returns nil.
//
// Only what arrives this way is served as from a peer
// (clusterapi.FromPeer): a client-port request carrying the forwarded
// mark is served as any other.
func (s *Server) ServePeers(ln net.Listener) error {
	err := s.http.Serve(peerListener{ln})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown drains (Drain), then stops accepting connections and waits for
// in-flight requests until ctx ends (then closes what is left). What the
// server serves over is the caller's to close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Drain()
	s.lean.close()
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.log.Warn("drain timed out; closing open connections", "err", err)
		s.http.Close()
	}
	return err
}

// Close shuts down at once: open connections are closed.
func (s *Server) Close() error {
	s.Drain()
	s.lean.close()
	return s.http.Close()
}

func (s *Server) draining() bool {
	select {
	case <-s.drainC:
		return true
	default:
		return false
	}
}

// Service is the fence.Service the handlers call.
func (s *Server) Service() fence.Service { return s.svc }

// uiOr sends /ui and every path under /ui/ to page (the operator page,
// server/ui: static files, no credentials needed to load them; everything
// it shows comes from the API calls it makes), and every other request to
// next. Not through the ServeMux: its path cleaning answered /ui//x and
// /ui/../ with redirects that carried none of the page's security headers.
func uiOr(page, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/") {
			page.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
