package server

import (
	"crypto/tls"
	"log/slog"
	"os"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/server/ui"
)

// Config configures the HTTP side of a server: its connection, stream and
// time limits. What it serves over comes in Deps.
type Config struct {
	// Logger receives the server's logs; default text to stderr.
	Logger *slog.Logger
	// AuthResetFile is the file (in the node's data dir) whose content,
	// "N SECRET", permits one more auth bootstrap naming N, the store's
	// bootstraps so far, and SECRET (at least MinResetSecretLen
	// characters): the recovery of a lost admin token, for whoever has a
	// shell on a server (auth_reset.go, docs/operations.md). "" permits
	// none.
	AuthResetFile string
	// MaxTTL is the largest lease TTL accepted when Deps.Node knows no
	// rules recorded in the log yet; default fence.DefaultMaxTTL.
	MaxTTL time.Duration
	// MaxConns caps open client connections, default DefaultMaxConns. A
	// newcomer over the cap closes the oldest connection that has carried
	// no client request yet (conn_fair.go); when every one has, it waits in
	// the kernel's accept queue until one closes.
	MaxConns int
	// MaxConnsPerPrincipal caps, with authentication on, the connections
	// one principal holds: a connection belongs to the first principal
	// authenticated on it, and that principal's calls on one more are
	// refused RESOURCE_EXHAUSTED (conn_fair.go). Default
	// DefaultMaxConnsPerPrincipal.
	MaxConnsPerPrincipal int
	// UnprovenTimeout closes a connection that has carried no client
	// request this long after it was accepted, default ReadHeaderTimeout
	// (a connection that has lives IdleTimeout when idle).
	UnprovenTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's header, default
	// DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included, default
	// DefaultReadTimeout. It does not bound a blocking acquire's wait (the
	// body is read before the wait starts; see limits.go).
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long, default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing a reply once it is ready (a blocking
	// acquire's once its wait is over), default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MaxStreams caps the open SessionService.Stream streams, default
	// DefaultMaxStreams; more are refused with resource_exhausted.
	MaxStreams int
	// MaxStreamsPerPrincipal caps, with authentication on, the open
	// streams of one principal; more are refused with resource_exhausted
	// naming config.max_streams_per_principal (stream_quota.go). 0: no
	// quota (`fence serve` defaults to DefaultMaxStreamsPerPrincipal).
	MaxStreamsPerPrincipal int
	// MaxWatches caps the open watches (LockService.Watch and GET
	// /v1/watch), default DefaultMaxWatches; more are refused with
	// resource_exhausted naming config.max_watches. Watches have this
	// budget of their own: they take no slot of MaxStreams, and an SSE
	// watch's HTTP/1.1 connection gives its slot of MaxConns (and of
	// MaxConnsPerPrincipal) back while it carries the watch (watch.go).
	MaxWatches int
	// MaxWatchesPerPrincipal caps, with authentication on, the open
	// watches of one principal; more are refused with resource_exhausted
	// naming config.max_watches_per_principal. 0: no quota (`fence serve`
	// defaults to DefaultMaxWatchesPerPrincipal).
	MaxWatchesPerPrincipal int
	// StreamFirstMessageTimeout ends a stream whose first message has not
	// come this long after it was opened, default
	// DefaultStreamFirstMessageTimeout (stream_quota.go).
	StreamFirstMessageTimeout time.Duration
	// SessionIdleTimeout closes a connection of the lean session port
	// (ServeSessions) on which nothing arrived for this long, default
	// DefaultSessionIdleTimeout (the client pings every
	// leanwire.PingEvery).
	SessionIdleTimeout time.Duration
	// MaxStreamRequests caps the requests in flight on one stream, default
	// DefaultMaxStreamRequests; more are answered at once with
	// RESOURCE_EXHAUSTED and not applied (stream.go).
	MaxStreamRequests int
	// InsecureListen is reported by NodeStatus (insecure_listen): the
	// daemon was started with --insecure-listen.
	InsecureListen bool
	// UI is what /ui/ serves (server/ui): ui.Off (404), ui.Read or
	// ui.Full; "" is ui.DefaultMode.
	UI ui.Mode
	// MaxReplyBytes bounds the bytes of large replies (a Read's value, a
	// List page) held until written, all connections together, default
	// DefaultMaxReplyBytes; one connection holds at most
	// maxConnReplyBytes. A reply without room waits for it. It bounds
	// as well, apart, the large replies being made, before their size is
	// known (reply_budget.go).
	MaxReplyBytes int64
	// TLS, when set, makes Serve speak TLS (HTTP/2 by ALPN "h2" and
	// HTTP/1.1) on its listener with this config; its NextProtos should
	// offer "h2" and "http/1.1" (or its GetConfigForClient return configs
	// that do). ServePeers is not changed by it.
	TLS *tls.Config
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = fence.DefaultMaxTTL
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.MaxConnsPerPrincipal == 0 {
		c.MaxConnsPerPrincipal = DefaultMaxConnsPerPrincipal
	}
	if c.UnprovenTimeout == 0 {
		c.UnprovenTimeout = c.ReadHeaderTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxWatches == 0 {
		c.MaxWatches = DefaultMaxWatches
	}
	if c.MaxReplyBytes == 0 {
		c.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if c.StreamFirstMessageTimeout == 0 {
		c.StreamFirstMessageTimeout = DefaultStreamFirstMessageTimeout
	}
	if c.SessionIdleTimeout == 0 {
		c.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if c.MaxStreamRequests == 0 {
		c.MaxStreamRequests = DefaultMaxStreamRequests
	}
	return c
}
