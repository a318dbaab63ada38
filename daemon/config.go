package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/server"
	"github.com/fenceworks/fence/server/ui"
	"github.com/fenceworks/fence/state"
)

// Config configures a server and the node behind it.
type Config struct {
	// Listen is the TCP address Run listens on, default "127.0.0.1:7420".
	Listen string
	// SessionAddr, if set, is the TCP address of the lean session port
	// (server.ServeSessions): the Go client's session streams without
	// HTTP/2 (client.WithLeanSessions). Off ("") by default. It has the
	// client port's TLS and authentication.
	SessionAddr string
	// DataDir holds the node's raft log and snapshots, default "./fence-data".
	DataDir string
	// Rules are the rules the operator wants recorded in the log (largest
	// TTL, id memory, caps on waiters and resources): once the node takes
	// office it proposes them if the recorded ones differ, and they apply
	// to later commands only (see state.Config). Rules.MaxTTL is the
	// largest lease TTL accepted. The zero value means
	// state.DefaultConfig().
	Rules state.Config
	// WaiterGrace is how long a node that took office waits for the
	// clients of queued acquires to retry before it drops the waiters
	// nobody waits for (node.Config.WaiterGrace), default 5s.
	WaiterGrace time.Duration
	// WatchHistory is how many recent changes of locks the node keeps for
	// watches to resume from (node.Config.WatchHistory), default
	// node.DefaultWatchHistory.
	WatchHistory int
	// Logger receives server, node and raft logs; default text to stderr.
	Logger *slog.Logger
	// LogStore is node.LogStoreWAL (the only log store) or empty (the same);
	// a data dir holding a raft-boltdb raft.db is refused (see node.Config).
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
	// MaxConnsPerPrincipal caps, with authentication on, the client
	// connections one principal holds (server.Config.MaxConnsPerPrincipal),
	// default server.DefaultMaxConnsPerPrincipal.
	MaxConnsPerPrincipal int
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
	// streams of one principal (server.Config.MaxStreamsPerPrincipal);
	// DefaultConfig's is server.DefaultMaxStreamsPerPrincipal, 0 is no
	// quota (so it is not filled in from DefaultConfig when zero).
	MaxStreamsPerPrincipal int
	// MaxWatches caps the open watches (server.Config.MaxWatches),
	// default server.DefaultMaxWatches; MaxWatchesPerPrincipal caps one
	// principal's with authentication on (DefaultConfig's is
	// server.DefaultMaxWatchesPerPrincipal, 0 is no quota).
	MaxWatches             int
	MaxWatchesPerPrincipal int
	// StreamFirstMessageTimeout ends a stream whose first message has not
	// come this long after it was opened, default
	// server.DefaultStreamFirstMessageTimeout.
	StreamFirstMessageTimeout time.Duration
	// MaxStreamRequests caps the requests in flight on one stream, default
	// DefaultMaxStreamRequests; more are answered at once with
	// RESOURCE_EXHAUSTED and not applied (stream.go).
	MaxStreamRequests int
	// MaxReplyBytes bounds the bytes of large replies (a Read's value, a
	// List page) held until they are written, all client connections
	// together, default server.DefaultMaxReplyBytes (one connection holds
	// at most 16 MiB of them); a reply without room waits for it. As
	// much again bounds the large replies being made.
	MaxReplyBytes int64

	// CertFile and KeyFile, both set, serve the client API (health,
	// readiness and metrics included) over TLS with this PEM certificate
	// and its unencrypted key: HTTP/2 by ALPN "h2" and HTTP/1.1. Empty:
	// plain HTTP (and h2c). The files are re-read when they change (a
	// handshake looks at most once a second) and on ReloadTLS; a load that
	// fails keeps the previous certificate and logs an error. The raft
	// port is not changed by them.
	CertFile, KeyFile string
	// TrustedCAFile is a PEM file of the CAs that sign client
	// certificates (re-read as CertFile is). Without ClientCertAuth a
	// client certificate is checked against it when a client sends one
	// (tls.VerifyClientCertIfGiven); with it, every client must send one
	// (tls.RequireAndVerifyClientCert).
	TrustedCAFile string
	// ClientCertAuth: every client must present a certificate signed by a
	// CA of TrustedCAFile (etcd's --client-cert-auth).
	ClientCertAuth bool

	// PeerCertFile, PeerKeyFile and PeerTrustedCAFile, all set (cluster
	// mode only), make every connection of the raft port mutual TLS, in and
	// out, raft and API alike (raftstore.WithPeerTLS): each side presents
	// a certificate signed by a CA of PeerTrustedCAFile whose URI SAN
	// fence-node://NODE-ID names it; a node that is not a member (or not
	// the member at the address dialed) is refused. The certificate must
	// name this node's NodeID. Re-read as CertFile is.
	PeerCertFile, PeerKeyFile, PeerTrustedCAFile string

	// RequireSignedWrites: the built-in store refuses a write with a bare
	// token once the cluster has a signing key (node.Config).
	RequireSignedWrites bool

	// InsecureListen lets Run listen on a non-loopback address without TLS
	// (the client port without CertFile, the raft port without the peer
	// files); without it Run refuses (*InsecureListenError). It is logged
	// as an error and reported by NodeStatus.
	InsecureListen bool
	// UI is what the client port serves at /ui/ (--ui): "off", "read"
	// or "full" (server/ui); "" is ui.DefaultMode.
	UI string

	// ReloadTLS: every value received re-reads the certificate, key and
	// CA files, the peer ones too (`fence serve` sends SIGHUP here). Nil: only changed files
	// are re-read.
	ReloadTLS <-chan os.Signal
}

// The per-principal quotas `fence serve` proposes: a tenth of the global
// caps on sessions, waiters, remembered ids and locks (state.DefaultConfig), so
// that ten principals at their quota still leave room. They bind
// authenticated principals only: with authentication off no call has a
// principal, and only the global caps apply. A role may set its own
// (`fence role quota`).
const (
	DefaultMaxSessionsPerPrincipal = 10_000
	DefaultMaxWaitersPerPrincipal  = 10_000
	DefaultMaxIDsPerPrincipal      = 100_000
	DefaultMaxLocksPerPrincipal    = 100_000
)

// DefaultListen and DefaultDataDir are the defaults of `fence serve`.
const (
	DefaultListen  = "127.0.0.1:7420"
	DefaultDataDir = "./fence-data"
)

// DefaultConfig is the configuration of `fence serve` without flags: a
// single node on DefaultListen with its data in DefaultDataDir, the
// default rules and the server's default limits. Every default of the
// daemon is here.
func DefaultConfig() Config {
	rules := state.DefaultConfig()
	rules.MaxLockDelay = fence.DefaultMaxLockDelay
	rules.MaxSessionsPerPrincipal = DefaultMaxSessionsPerPrincipal
	rules.MaxWaitersPerPrincipal = DefaultMaxWaitersPerPrincipal
	rules.MaxIDsPerPrincipal = DefaultMaxIDsPerPrincipal
	rules.MaxLocksPerPrincipal = DefaultMaxLocksPerPrincipal
	return Config{
		Listen: DefaultListen, DataDir: DefaultDataDir, NodeID: DefaultNodeID, LogStore: node.LogStoreWAL,
		Rules:           rules,
		WaiterGrace:     5 * time.Second,
		WatchHistory:    node.DefaultWatchHistory,
		ShutdownTimeout: 10 * time.Second, LockTimeout: time.Second, ReadyTimeout: 10 * time.Second,
		MaxConns: server.DefaultMaxConns, MaxConnsPerPrincipal: server.DefaultMaxConnsPerPrincipal, MaxStreams: server.DefaultMaxStreams, MaxStreamRequests: server.DefaultMaxStreamRequests,
		MaxReplyBytes: server.DefaultMaxReplyBytes,
		MaxWatches:    server.DefaultMaxWatches, MaxWatchesPerPrincipal: server.DefaultMaxWatchesPerPrincipal,
		MaxStreamsPerPrincipal: server.DefaultMaxStreamsPerPrincipal, StreamFirstMessageTimeout: server.DefaultStreamFirstMessageTimeout,
		ReadHeaderTimeout: server.DefaultReadHeaderTimeout, ReadTimeout: server.DefaultReadTimeout,
		IdleTimeout: server.DefaultIdleTimeout, WriteTimeout: server.DefaultWriteTimeout,
		UI: string(ui.DefaultMode),
	}
}

// MaxWatchHistory bounds --watch-history: a change held costs about 200
// bytes, so the largest ring holds about 400 MiB.
const MaxWatchHistory = 1 << 21

// DefaultNodeID is the raft server ID of a node not given one.
const DefaultNodeID = "fence-1"

// withDefaults fills each zero field from DefaultConfig (and Logger with
// text to stderr).
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	orString(&c.Listen, d.Listen)
	orString(&c.DataDir, d.DataDir)
	orString(&c.NodeID, d.NodeID)
	if c.Rules == (state.Config{}) {
		c.Rules = d.Rules
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	for _, f := range []struct{ v, def *time.Duration }{
		{&c.WaiterGrace, &d.WaiterGrace}, {&c.ShutdownTimeout, &d.ShutdownTimeout}, {&c.LockTimeout, &d.LockTimeout},
		{&c.ReadyTimeout, &d.ReadyTimeout}, {&c.ReadHeaderTimeout, &d.ReadHeaderTimeout}, {&c.ReadTimeout, &d.ReadTimeout},
		{&c.IdleTimeout, &d.IdleTimeout}, {&c.WriteTimeout, &d.WriteTimeout}, {&c.StreamFirstMessageTimeout, &d.StreamFirstMessageTimeout},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	for _, f := range []struct{ v, def *int }{
		{&c.WatchHistory, &d.WatchHistory}, {&c.MaxConns, &d.MaxConns}, {&c.MaxConnsPerPrincipal, &d.MaxConnsPerPrincipal}, {&c.MaxStreams, &d.MaxStreams}, {&c.MaxStreamRequests, &d.MaxStreamRequests},
		{&c.MaxWatches, &d.MaxWatches},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if c.MaxReplyBytes == 0 {
		c.MaxReplyBytes = d.MaxReplyBytes
	}
	return c
}

func orString(v *string, def string) {
	if *v == "" {
		*v = def
	}
}

// Validate checks c as given (start from DefaultConfig; New checks its
// config after filling zero fields from it): a bad value is a
// *fence.InvalidError whose Field is the setting's name as
// "config.read_timeout" (the rules' own as state.Config.Validate names
// them) and whose Bound says what it must be.
func (c Config) Validate() error {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"ready_timeout", c.ReadyTimeout}, {"read_header_timeout", c.ReadHeaderTimeout}, {"read_timeout", c.ReadTimeout},
		{"idle_timeout", c.IdleTimeout}, {"write_timeout", c.WriteTimeout}, {"waiter_grace", c.WaiterGrace},
		{"shutdown_timeout", c.ShutdownTimeout}, {"lock_timeout", c.LockTimeout}, {"stream_first_message_timeout", c.StreamFirstMessageTimeout},
	} {
		if d.v <= 0 {
			return fence.Invalid("config."+d.field, "more than 0", d.v.String())
		}
	}
	for _, n := range []struct {
		field string
		v     int
	}{{"max_conns", c.MaxConns}, {"max_conns_per_principal", c.MaxConnsPerPrincipal}, {"max_streams", c.MaxStreams}, {"max_stream_requests", c.MaxStreamRequests}, {"max_watches", c.MaxWatches}} {
		if n.v < 1 {
			return fence.Invalid("config."+n.field, "at least 1", fmt.Sprint(n.v))
		}
	}
	if c.UI != "" {
		if _, err := ui.ParseMode(c.UI); err != nil {
			return err
		}
	}
	if c.WatchHistory < 1 || c.WatchHistory > MaxWatchHistory {
		return fence.Invalid("config.watch_history", fmt.Sprintf("1 to %d changes", MaxWatchHistory), fmt.Sprint(c.WatchHistory))
	}
	if c.MaxWatchesPerPrincipal < 0 {
		return fence.Invalid("config.max_watches_per_principal", "at least 0 (0: no quota)", fmt.Sprint(c.MaxWatchesPerPrincipal))
	}
	if c.MaxStreamsPerPrincipal < 0 {
		return fence.Invalid("config.max_streams_per_principal", "at least 0 (0: no quota)", fmt.Sprint(c.MaxStreamsPerPrincipal))
	}
	if c.MaxReplyBytes < 1 {
		return fence.Invalid("config.max_reply_bytes", "at least 1", fmt.Sprint(c.MaxReplyBytes))
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if err := c.validatePeerTLS(); err != nil {
		return err
	}
	if c.LogStore != "" && c.LogStore != node.LogStoreWAL {
		return fence.Invalid("config.log_store", `"`+node.LogStoreWAL+`", the only log store`, c.LogStore)
	}
	if c.Listen != "" && !hostPort(c.Listen) {
		return fence.Invalid("config.listen", "HOST:PORT with a port 0-65535", c.Listen)
	}
	if c.SessionAddr != "" && !hostPort(c.SessionAddr) {
		return fence.Invalid("config.session_addr", "HOST:PORT with a port 0-65535", c.SessionAddr)
	}
	if c.Cluster.RaftAddr != "" && !hostPort(c.Cluster.RaftAddr) {
		return fence.Invalid("config.cluster.raft_addr", "HOST:PORT with a port 0-65535", c.Cluster.RaftAddr)
	}
	return c.Rules.Validate()
}

// hostPort reports whether addr is HOST:PORT with a decimal port 0-65535
// (the host is resolved when the port is opened).
func hostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	return err == nil && p <= 65535
}
