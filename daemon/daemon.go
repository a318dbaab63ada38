package daemon

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/internal/nodeview"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/server"
	"github.com/fenceworks/fence/server/ui"
)

// Daemon is one Fence node and the API in front of it: the raft port
// (cluster mode), the node, the membership and leader forwarder, and the
// server, assembled from one Config.
type Daemon struct {
	cfg     Config
	log     *slog.Logger
	node    *node.Node
	cluster *clusterParts // raft port, forwarder, membership (cluster.go)
	srv     *server.Server
	certs   *certReloader // nil without TLS (tls.go)
}

// New opens (or creates) the node in cfg.DataDir and builds the server in
// front of it. It does not listen; call Serve, or mount Handler. A config
// Validate refuses is refused. opts are test seams (WithHooks).
func New(cfg Config, opts ...Option) (*Daemon, error) {
	var h Hooks
	for _, o := range opts {
		o(&h)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	nc, cp, err := withCluster(cfg, h, node.Config{
		DataDir: cfg.DataDir, LogStore: cfg.LogStore, NodeID: cfg.NodeID, Rules: cfg.Rules,
		Logger: cfg.Logger, LockTimeout: cfg.LockTimeout, ReadyTimeout: cfg.ReadyTimeout, WaiterGrace: cfg.WaiterGrace,
		RequireSignedWrites: cfg.RequireSignedWrites, WatchHistory: cfg.WatchHistory,
	})
	if err != nil {
		return nil, err
	}
	n, err := node.Open(nc)
	if err != nil {
		cp.close(cfg.Logger)
		return nil, err
	}
	cp.watchMembers(n)
	var certs *certReloader
	var tlsCfg *tls.Config
	if cfg.TLSEnabled() {
		if certs, err = newCertReloader(cfg); err != nil {
			n.Close()
			cp.close(cfg.Logger)
			return nil, err
		}
		tlsCfg = certs.serverConfig()
	}
	metrics := nodeview.Metrics(n)
	if certs != nil {
		metrics = append(metrics, certs.collectors()...)
	}
	metrics = append(metrics, cp.peerMetrics()...)
	svc, err := cp.service(cfg, n)
	if err != nil {
		n.Close()
		cp.close(cfg.Logger)
		return nil, err
	}
	srv, err := server.New(server.Config{
		Logger: cfg.Logger, MaxTTL: cfg.Rules.MaxTTL, MaxConns: cfg.MaxConns,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout, ReadTimeout: cfg.ReadTimeout, IdleTimeout: cfg.IdleTimeout, WriteTimeout: cfg.WriteTimeout,
		MaxStreams: cfg.MaxStreams, MaxStreamRequests: cfg.MaxStreamRequests, MaxReplyBytes: cfg.MaxReplyBytes, MaxConnsPerPrincipal: cfg.MaxConnsPerPrincipal, TLS: tlsCfg,
		MaxWatches: cfg.MaxWatches, MaxWatchesPerPrincipal: cfg.MaxWatchesPerPrincipal,
		MaxStreamsPerPrincipal: cfg.MaxStreamsPerPrincipal, StreamFirstMessageTimeout: cfg.StreamFirstMessageTimeout,
		AuthResetFile:  filepath.Join(cfg.DataDir, AuthResetFile),
		InsecureListen: cfg.InsecureListen,
		UI:             ui.Mode(cfg.UI),
	}, server.Deps{
		PeerAdmitted: cp.peerAdmitted(),
		Service:      svc, Node: nodeview.Node{N: n, Caught: cp.members.CaughtUp}, Cluster: nodeview.Membership{M: cp.members}, Errors: errorKinds,
		Auth:    nodeview.Auth{N: n, Behind: cp.members.Behind, Past: cp.members.PastThrough},
		Metrics: metrics,
		Watches: watchSource(n),
		// The operator view's stories and grant counts (server/story.go).
		Changes: n.OnChanges,
		// A call another node forwarded here is marked, so it is never
		// forwarded again (cluster.Forwarder, cluster.Membership).
		Middleware: cluster.MarkForwarded,
	})
	if err != nil {
		n.Close()
		cp.close(cfg.Logger)
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, node: n, cluster: cp, srv: srv, certs: certs}
	cp.serve(d)
	return d, nil
}

// AuthResetFile, in a node's data dir, permits one more auth bootstrap
// when it holds "N SECRET": N the number of bootstraps the store has had,
// SECRET at least server.MinResetSecretLen characters, both given to the
// bootstrap: how an operator with a shell on a server recovers a lost
// admin token (docs/operations.md).
const AuthResetFile = "auth-reset"

// Handler is the API, /healthz, /readyz and /metrics on one mux (for
// httptest and for embedding).
func (d *Daemon) Handler() http.Handler { return d.srv.Handler() }

// Node is the node behind the server.
func (d *Daemon) Node() *node.Node { return d.node }

// Ready reports what /readyz does: the node can serve (node.Status.Ready)
// and, in a cluster, has caught up with its cluster since it started
// (cluster.Membership.CaughtUp; until then the server refuses calls).
func (d *Daemon) Ready() bool {
	if !d.node.Status().Ready() {
		return false
	}
	return d.cluster.members == nil || d.cluster.members.CaughtUp()
}

// Server is the server in front of the node.
func (d *Daemon) Server() *server.Server { return d.srv }

// Service is the fence.Service the handlers call.
func (d *Daemon) Service() fence.Service { return d.srv.Service() }

// Serve serves HTTP/1.1 and unencrypted HTTP/2 on ln until Shutdown or
// Close, or with cfg.CertFile TLS (HTTP/2 by ALPN and HTTP/1.1); it then
// returns nil. At most cfg.MaxConns connections are open at once.
func (d *Daemon) Serve(ln net.Listener) error { return d.srv.Serve(ln) }

// ReloadTLS re-reads the certificate, key and CA files now, the client
// port's and the raft port's (what SIGHUP does to `fence serve`). A load
// that fails returns its error and the previous certificate stays in use;
// without TLS it does nothing.
// Connections already open are not touched.
func (d *Daemon) ReloadTLS() error {
	var err error
	if d.certs != nil {
		err = d.certs.Reload()
	}
	if d.cluster.certs != nil {
		if perr := d.cluster.certs.Reload(); err == nil {
			err = perr
		}
	}
	return err
}

// URL is the base URL clients use for the API on addr: https:// when the
// daemon serves TLS.
func (d *Daemon) URL(addr net.Addr) string {
	if d.certs != nil {
		return "https://" + addr.String()
	}
	return "http://" + addr.String()
}

// Shutdown cancels waiting acquires (their clients get Unavailable and
// their waits are withdrawn from the queue), hands leadership over when
// this node leads a cluster (handover.go), then stops accepting
// connections and drains in-flight requests until ctx ends (then closes
// what is left), and closes the node: raft stops and the stores close.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.srv.Drain()
	d.handOver(ctx)
	err := d.srv.Shutdown(ctx)
	if nerr := d.node.Close(); nerr != nil && err == nil {
		err = nerr
	}
	d.cluster.close(d.log)
	return err
}

// Close shuts down at once: open connections are closed, then the node.
func (d *Daemon) Close() error {
	d.srv.Close()
	err := d.node.Close()
	d.cluster.close(d.log)
	return err
}

// Run opens (or creates) the node in cfg.DataDir, serves the API on
// cfg.Listen until ctx is cancelled, then shuts down gracefully: in-flight
// requests drain for up to cfg.ShutdownTimeout, raft stops, the stores
// close. It logs "fence serving on http://ADDR" once ready.
func Run(ctx context.Context, cfg Config, opts ...Option) error {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.checkPeerCertNamesNode(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	if err := checkExposure(cfg, "client", "--listen", cfg.Listen, ln.Addr(), cfg.TLSEnabled()); err != nil {
		ln.Close()
		return err
	}
	var sln net.Listener
	if cfg.SessionAddr != "" {
		if sln, err = net.Listen("tcp", cfg.SessionAddr); err != nil {
			ln.Close()
			return err
		}
		if err := checkExposure(cfg, "lean session", "--session-addr", cfg.SessionAddr, sln.Addr(), cfg.TLSEnabled()); err != nil {
			ln.Close()
			sln.Close()
			return err
		}
	}
	d, err := New(cfg, opts...)
	if err != nil {
		ln.Close()
		if sln != nil {
			sln.Close()
		}
		return err
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- d.Serve(ln) }()
	if sln != nil {
		go func() {
			if err := d.srv.ServeSessions(sln); err != nil {
				serveErr <- err
			}
		}()
		d.log.Info("fence lean session port on "+sln.Addr().String(), "tls", cfg.TLSEnabled())
	}
	d.log.Info("fence serving on "+d.URL(ln.Addr()), "data_dir", cfg.DataDir, "last_token", d.node.LastToken())
	switch {
	case loopback(ln.Addr()):
	case !cfg.TLSEnabled():
		d.log.Error("--insecure-listen: listening on a non-loopback address without TLS or authentication: " +
			"anyone who can reach " + ln.Addr().String() + " can take and release locks and write resources; " +
			"listen on 127.0.0.1, keep the port on a trusted network, or serve TLS with client certificates (--cert-file, --key-file, --trusted-ca-file, --client-cert-auth)")
	case !cfg.ClientCertAuth:
		d.log.Warn("listening on a non-loopback address with TLS but without client certificates (--client-cert-auth): " +
			"anyone who can reach " + ln.Addr().String() + " can take and release locks and write resources")
	}
	if cfg.ReloadTLS != nil {
		rctx, stopReload := context.WithCancel(ctx)
		defer stopReload()
		go func() {
			for {
				select {
				case <-rctx.Done():
					return
				case <-cfg.ReloadTLS:
					d.ReloadTLS() // logs its outcome
				}
			}
		}()
	}
	var joinErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		d.Close()
		return err
	case joinErr = <-d.cluster.joinFailed(ctx, cfg):
		d.log.Error("could not join the cluster; stopping", "err", joinErr)
	}
	d.log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err = d.Shutdown(sctx)
	<-serveErr
	d.log.Info("stopped")
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

// ServeSessions serves the lean session port on ln (server.ServeSessions;
// Run does it for Config.SessionAddr) until Shutdown or Close.
func (d *Daemon) ServeSessions(ln net.Listener) error { return d.srv.ServeSessions(ln) }
