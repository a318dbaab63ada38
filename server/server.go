package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/node"
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

// Server is the Fence API in front of one node: its handlers validate each
// request and ask svc (the node's fence.Service, or what Config.Service
// made of the node); health, readiness and metrics read the node's status.
type Server struct {
	cfg     Config
	log     *slog.Logger
	node    *node.Node
	svc     fence.Service
	cluster *clusterParts // raft port, forwarder, membership (cluster_node.go)
	status  nodeStatus    // health, readiness, metrics
	metrics *metrics
	handler http.Handler
	http    *http.Server

	baseCtx    context.Context // parent of every request context
	cancelBase context.CancelFunc
	drainOnce  sync.Once
	drainC     chan struct{}
	conns      connCount    // client connections (Serve's listener)
	streams    atomic.Int64 // open SessionService.Stream streams
}

// New opens (or creates) the node in cfg.DataDir and builds the handlers. It
// does not listen; call Serve, or mount Handler.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	nc, cp, err := withCluster(cfg, node.Config{
		DataDir: cfg.DataDir, LogStore: cfg.LogStore, NodeID: cfg.NodeID, Rules: cfg.Rules,
		Logger: cfg.Logger, LockTimeout: cfg.LockTimeout, ReadyTimeout: cfg.ReadyTimeout, WaiterGrace: cfg.WaiterGrace,
	})
	if err != nil {
		return nil, err
	}
	n, err := node.Open(nc)
	if err != nil {
		cp.close(cfg.Logger)
		return nil, err
	}
	svc, err := cp.service(cfg, n)
	if err != nil {
		n.Close()
		cp.close(cfg.Logger)
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, node: n, svc: svc, status: n, cluster: cp, drainC: make(chan struct{})}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.metrics = newMetrics(s.status, &s.conns, &s.streams)

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
	lockPath, lockHandler := fencev1connect.NewLockServiceHandler(lockService{s}, opts...)
	resPath, resHandler := fencev1connect.NewResourceServiceHandler(resourceService{s}, opts...)
	sessPath, sessHandler := fencev1connect.NewSessionServiceHandler(sessionService{s}, opts...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	// SessionService.Stream has limits of its own (stream_http.go).
	// refusalReasons, outermost, gives every refusal its reason and
	// facts, also those made in front of Connect (jsonerror.go).
	s.handler = refusalReasons(serveStreams(sessHandler, limitWrites(limitBodies(checkJSONBodies(apiRouter{
		{prefix: lockPath, h: lockHandler},
		{prefix: resPath, h: resHandler},
		{prefix: sessPath, h: sessHandler},
		cp.route(s, opts),
		s.maintenanceRoute(opts),
		s.healthRoute(opts), // grpc.health.v1 (grpchealth.go)
		reflectRoute(opts),  // gRPC server reflection (reflect.go)
		{prefix: "/", h: mux},
	})), cfg.WriteTimeout), cfg.WriteTimeout))
	// A call another node forwarded here is marked, so it is never
	// forwarded again (cluster.Forwarder, cluster.Membership).
	s.handler = cluster.MarkForwarded(s.handler)

	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	s.http = &http.Server{
		Handler:   s.handler,
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
		ErrorLog:          httpErrorLog(cfg.Logger),
	}
	cp.serve(s)
	return s, nil
}

// Handler is the API, /healthz, /readyz and /metrics on one mux (for
// httptest and for embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Node is the node behind the server.
func (s *Server) Node() *node.Node { return s.node }

// Serve serves HTTP/1.1 and unencrypted HTTP/2 on ln until Shutdown or
// Close; it then returns nil.
// At most cfg.MaxConns connections are open at once.
func (s *Server) Serve(ln net.Listener) error {
	err := s.http.Serve(newLimitListener(ln, s.cfg.MaxConns, &s.conns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown cancels waiting acquires (their clients get Unavailable and
// their waits are withdrawn from the queue), hands leadership over when
// this node leads a cluster (handover.go), then stops accepting
// connections and drains in-flight requests until ctx ends (then closes
// what is left), and closes the node: raft stops and the stores close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.drainOnce.Do(func() { close(s.drainC) })
	s.cancelBase()
	s.handOver(ctx)
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.log.Warn("drain timed out; closing open connections", "err", err)
		s.http.Close()
	}
	if nerr := s.node.Close(); nerr != nil && err == nil {
		err = nerr
	}
	s.cluster.close(s.log)
	return err
}

// Close shuts down at once: open connections are closed, then the node.
func (s *Server) Close() error {
	s.drainOnce.Do(func() { close(s.drainC) })
	s.cancelBase()
	s.http.Close()
	err := s.node.Close()
	s.cluster.close(s.log)
	return err
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

// Run opens (or creates) the node in cfg.DataDir, serves the API on
// cfg.Listen until ctx is cancelled, then shuts down gracefully: in-flight
// requests drain for up to cfg.ShutdownTimeout, raft stops, the stores
// close. It logs "fence serving on http://ADDR" once ready.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	if err := cfg.Rules.Validate(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	s, err := New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.Serve(ln) }()
	s.log.Info("fence serving on http://"+ln.Addr().String(), "data_dir", cfg.DataDir, "last_token", s.node.LastToken())
	if !loopback(ln.Addr()) {
		s.log.Warn("listening on a non-loopback address without TLS or authentication (Fence has neither yet): " +
			"anyone who can reach " + ln.Addr().String() + " can take and release locks and write resources; " +
			"listen on 127.0.0.1 or keep the port on a trusted network")
	}
	var joinErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		s.Close()
		return err
	case joinErr = <-s.cluster.joinFailed(ctx, cfg):
		s.log.Error("could not join the cluster; stopping", "err", joinErr)
	}
	s.log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err = s.Shutdown(sctx)
	<-serveErr
	s.log.Info("stopped")
	if joinErr != nil {
		return joinErr
	}
	return err
}

// loopback reports whether addr is a loopback address (127.0.0.0/8, ::1).
// A listener on every interface (0.0.0.0, ::) is not.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
