package daemon

import (
	"log/slog"
	"os"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/server"
	"github.com/fenceworks/fence/state"
)

// Config configures a server and the node behind it.
type Config struct {
	// Listen is the TCP address Run listens on, default "127.0.0.1:7420".
	Listen string
	// DataDir holds the node's raft log and snapshots, default "./fence-data".
	DataDir string
	// MaxTTL is the largest lease TTL accepted, default fence.DefaultMaxTTL.
	// Set, it overrides Rules.MaxTTL.
	MaxTTL time.Duration
	// Rules are the rules the operator wants recorded in the log (largest
	// TTL, id memory, caps on waiters and resources): once the node takes
	// office it proposes them if the recorded ones differ, and they apply
	// to later commands only (see state.Config). The zero value means
	// state.DefaultConfig().
	Rules state.Config
	// WaiterGrace is how long a node that took office waits for the
	// clients of queued acquires to retry before it drops the waiters
	// nobody waits for (node.Config.WaiterGrace); 0 means the node's
	// default.
	WaiterGrace time.Duration
	// Logger receives server, node and raft logs; default text to stderr.
	Logger *slog.Logger
	// LogStore is node.LogStoreWAL or node.LogStoreBolt; empty means the
	// kind the data dir holds, or the WAL for a new dir (see node.Config).
	LogStore string
	// NodeID is the raft server ID, default "fence-1".
	NodeID string
	// ShutdownTimeout bounds the drain of in-flight requests on shutdown,
	// default 10s; connections still open after it are closed.
	ShutdownTimeout time.Duration
	// LockTimeout bounds the wait for the data directory's file lock, after
	// which a second server on the same DataDir fails; default 1s.
	LockTimeout time.Duration
	// ReadyTimeout bounds how long New waits for the node to take office
	// (replaying its log included); past it New fails. Default 10s
	// (node.Config.ReadyTimeout).
	ReadyTimeout time.Duration

	// Service makes the fence.Service the API handlers call from the node
	// New opened. Nil means the node's own (node.Node.Service) alone, and
	// the leader forwarder (cluster.Forwarder over the node's Service) in
	// cluster mode; set, it replaces either (an embedding program, a
	// test). New calls it once, after the node is open; an error closes
	// the node and fails New. The handlers validate every request before
	// they call the Service, and map its errors (a refusal to its code and
	// detail; fence.ErrUnavailable to Unavailable).
	Service func(*node.Node) (fence.Service, error)

	// Cluster makes the node one of a raft cluster (see ClusterConfig);
	// the zero value is a single node.
	Cluster ClusterConfig

	// MaxConns caps open client connections, default DefaultMaxConns; more
	// wait in the kernel's accept queue until one closes.
	MaxConns int
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
	// MaxStreamRequests caps the requests in flight on one stream, default
	// DefaultMaxStreamRequests; more are answered at once with
	// RESOURCE_EXHAUSTED and not applied (stream.go).
	MaxStreamRequests int
}

// DefaultListen and DefaultDataDir are the defaults of `fence serve`.
const (
	DefaultListen  = "127.0.0.1:7420"
	DefaultDataDir = "./fence-data"
)

func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Rules == (state.Config{}) {
		c.Rules = state.DefaultConfig()
	}
	if c.MaxTTL != 0 {
		c.Rules.MaxTTL = c.MaxTTL
	}
	c.MaxTTL = c.Rules.MaxTTL
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.MaxConns == 0 {
		c.MaxConns = server.DefaultMaxConns
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = server.DefaultReadHeaderTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = server.DefaultReadTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = server.DefaultIdleTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = server.DefaultWriteTimeout
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = server.DefaultMaxStreams
	}
	if c.MaxStreamRequests == 0 {
		c.MaxStreamRequests = server.DefaultMaxStreamRequests
	}
	return c
}
