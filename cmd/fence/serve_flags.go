package main

import (
	"flag"
	"time"

	"github.com/fenceworks/fence/daemon"
)

// serveSettings is what serve's flags set: the daemon's config (its
// defaults are daemon.DefaultConfig's, so a flag's default is the
// daemon's), the logger's, and the cluster flags, which are checked
// together before they become the daemon's cluster config
// (clusterFlags.config).
type serveSettings struct {
	cfg                 daemon.Config
	logFormat, logLevel string
	memoryLimit         string // --memory-limit, read by parseMemoryLimit (memlimit.go)
	cf                  clusterFlags
}

// uiModes are the values of --ui (server/ui.Mode).
var uiModes = []string{"read", "full", "off"}

// serveFlag is one row of serve's flag table: the flag's name, its
// --help text and where its value goes. Its FENCE_ variable is derived
// from the name (envName), so a row is a flag and a variable at once;
// docs/operations.md's table lists every row (serve_flags_test.go).
type serveFlag struct {
	name, usage string
	// value is the flag.Value bound to its place in s; its current value
	// is the default.
	value func(s *serveSettings) flag.Value
}

// serveFlagTable is every flag of `fence serve`, in --help order.
var serveFlagTable = []serveFlag{
	{"listen", "TCP address to listen on (a non-loopback address is refused without TLS, unless --insecure-listen; warned about without --client-cert-auth)",
		str(func(s *serveSettings) *string { return &s.cfg.Listen })},
	{"session-addr", "TCP address of the lean session port (off when empty): the Go client's session streams over TCP/TLS without HTTP/2 (client.WithLeanSessions); same TLS and authentication as --listen",
		str(func(s *serveSettings) *string { return &s.cfg.SessionAddr })},
	{"cert-file", "`FILE`: PEM certificate of the client port; with --key-file the API, health and metrics are served over TLS (re-read when it changes or on SIGHUP)",
		str(func(s *serveSettings) *string { return &s.cfg.CertFile })},
	{"key-file", "`FILE`: PEM (unencrypted) key of --cert-file",
		str(func(s *serveSettings) *string { return &s.cfg.KeyFile })},
	{"trusted-ca-file", "`FILE`: PEM CA certificates that sign client certificates; a client certificate sent is checked against them",
		str(func(s *serveSettings) *string { return &s.cfg.TrustedCAFile })},
	{"client-cert-auth", "every client must present a certificate signed by a CA of --trusted-ca-file",
		boolean(func(s *serveSettings) *bool { return &s.cfg.ClientCertAuth })},
	{"require-signed-writes", "the built-in store (Write, Add, Delete) refuses a bare token: every write carries its lease's signedToken (FORGED_TOKEN otherwise); set it on every node",
		boolean(func(s *serveSettings) *bool { return &s.cfg.RequireSignedWrites })},
	{"insecure-listen", "listen on a non-loopback --listen or --raft-addr even without TLS on that port (logged as an error, shown by fence status); without it such a start is refused",
		boolean(func(s *serveSettings) *bool { return &s.cfg.InsecureListen })},
	{"data-dir", "directory for the raft log and snapshots",
		str(func(s *serveSettings) *string { return &s.cfg.DataDir })},
	{"log-store", "raft log store: wal, the only one (a dir holding a raft-boltdb raft.db is refused)",
		str(func(s *serveSettings) *string { return &s.cfg.LogStore })},
	{"log-format", "log `format` on stderr: text (key=value) or json (one object a line)",
		oneOf(logFormats, func(s *serveSettings) *string { return &s.logFormat })},
	{"log-level", "least important log `level` shown: debug (also every refused request), info, warn or error",
		oneOf(logLevels, func(s *serveSettings) *string { return &s.logLevel })},
	{"ui", "what /ui/ serves on the client port: off (404), read (the operator page, no actions) or full (and a release button for admins); same TLS and authentication as the API",
		oneOf(uiModes, func(s *serveSettings) *string { return &s.cfg.UI })},
	{"ready-timeout", "how long to wait for the node to replay its log and take office (a single node), or to be added (--join), before giving up (exit 1)",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.ReadyTimeout })},
	{"waiter-grace", "after taking office, how long queued acquires have to be retried by their clients before they are dropped",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.WaiterGrace })},

	// Cluster (serve_cluster.go). Without --raft-addr: a single node.
	{"node-id", "this node's id in the cluster (raft's server id); a restart must keep it",
		str(func(s *serveSettings) *string { return &s.cf.nodeID })},
	{"raft-addr", "`HOST:PORT` of the raft port (raft and, for other nodes, the API); empty: a single node, no cluster",
		str(func(s *serveSettings) *string { return &s.cf.raftAddr })},
	{"raft-advertise", "`HOST:PORT` other nodes dial to reach --raft-addr (default: --raft-addr)",
		str(func(s *serveSettings) *string { return &s.cf.raftAdvertise })},
	{"peer-cert-file", "`FILE`: PEM certificate of the raft port, naming this node by the URI SAN fence-node://NODE-ID (fence cert --node-id); with --peer-key-file and --peer-trusted-ca-file every peer connection is mutual TLS (re-read when it changes or on SIGHUP)",
		str(func(s *serveSettings) *string { return &s.cfg.PeerCertFile })},
	{"peer-key-file", "`FILE`: PEM (unencrypted) key of --peer-cert-file",
		str(func(s *serveSettings) *string { return &s.cfg.PeerKeyFile })},
	{"peer-trusted-ca-file", "`FILE`: PEM CA certificates that sign every node's peer certificate; a peer without one, or not a member, is refused",
		str(func(s *serveSettings) *string { return &s.cfg.PeerTrustedCAFile })},
	{"bootstrap", "first start only: make a one-voter cluster of this node (others then --join it)",
		boolean(func(s *serveSettings) *bool { return &s.cf.bootstrap })},
	{"join", "first start only: `URL[,URL]` of running nodes; ask them to add this node as a voter (until one does or --ready-timeout)",
		str(func(s *serveSettings) *string { return &s.cf.join })},
	{"peers", "first start only: `ID=HOST:PORT,...`, every voter of a static cluster (this node included); give every node the same list",
		str(func(s *serveSettings) *string { return &s.cf.peers })},
	{"heartbeat-timeout", "raft heartbeat timeout (default 500ms in a cluster, 100ms alone)",
		dur(func(s *serveSettings) *time.Duration { return &s.cf.heartbeat })},
	{"election-timeout", "raft election timeout (default 1s in a cluster, 100ms alone)",
		dur(func(s *serveSettings) *time.Duration { return &s.cf.election })},
	{"leader-lease-timeout", "raft leader lease timeout, at most --heartbeat-timeout (default 500ms in a cluster, 100ms alone)",
		dur(func(s *serveSettings) *time.Duration { return &s.cf.leaderLease })},
	{"commit-timeout", "raft commit timeout (default 10ms in a cluster, 5ms alone)",
		dur(func(s *serveSettings) *time.Duration { return &s.cf.commit })},

	// This process only.
	{"memory-limit", "soft memory limit of the Go runtime: auto (90% of the cgroup's memory limit; none without one), off, or a `SIZE` (450MiB, 2GB; at least 64MiB): the heap is collected before it passes it, at the price of more collections near it. GOMEMLIMIT, if set, wins",
		str(func(s *serveSettings) *string { return &s.memoryLimit })},

	// Connection limits (this process only).
	{"max-conns", "most client connections open at once; more wait to be accepted",
		integer(func(s *serveSettings) *int { return &s.cfg.MaxConns })},
	{"max-conns-per-principal", "with authentication on, most client connections one principal may hold; its calls on more are refused (RESOURCE_EXHAUSTED)",
		integer(func(s *serveSettings) *int { return &s.cfg.MaxConnsPerPrincipal })},
	{"max-streams", "most session streams open at once; more are refused (RESOURCE_EXHAUSTED)",
		integer(func(s *serveSettings) *int { return &s.cfg.MaxStreams })},
	{"max-streams-per-principal", "with authentication on, most session streams one principal may hold open; more are refused (RESOURCE_EXHAUSTED) and take no slot of --max-streams (0: no quota)",
		integer(func(s *serveSettings) *int { return &s.cfg.MaxStreamsPerPrincipal })},
	{"max-watches", "most watches (fence watch, LockService.Watch, GET /v1/watch) open at once; more are refused (RESOURCE_EXHAUSTED, HTTP 429). Watches take no slot of --max-streams, and an SSE watch's connection none of --max-conns",
		integer(func(s *serveSettings) *int { return &s.cfg.MaxWatches })},
	{"max-watches-per-principal", "with authentication on, most watches one principal may hold open; more are refused (RESOURCE_EXHAUSTED, HTTP 429) (0: no quota)",
		integer(func(s *serveSettings) *int { return &s.cfg.MaxWatchesPerPrincipal })},
	{"stream-first-message-timeout", "a session stream whose first message has not come this long after it opened is closed (DEADLINE_EXCEEDED) and frees its slot",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.StreamFirstMessageTimeout })},
	{"watch-history", "how many recent changes of locks the node keeps for watches (fence watch, GET /v1/watch) to resume from; a watch further behind is cut and resumes with the current state",
		integer(func(s *serveSettings) *int { return &s.cfg.WatchHistory })},
	{"max-stream-requests", "most requests in flight on one session stream; more are answered RESOURCE_EXHAUSTED and resent by the client",
		integer(func(s *serveSettings) *int { return &s.cfg.MaxStreamRequests })},
	{"max-reply-bytes", "most bytes of large replies (Read, List) held until written, all connections together (one holds at most 16 MiB); a reply without room waits for it; as much again bounds those being made",
		integer64(func(s *serveSettings) *int64 { return &s.cfg.MaxReplyBytes })},
	{"read-header-timeout", "time allowed to read a request's header",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.ReadHeaderTimeout })},
	{"read-timeout", "time allowed to read a whole request, body included (not a blocking acquire's wait)",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.ReadTimeout })},
	{"idle-timeout", "close a keep-alive connection idle this long",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.IdleTimeout })},
	{"write-timeout", "time allowed to write a reply once it is ready (a blocking acquire's once its wait ends); a client that does not read loses its connection",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.WriteTimeout })},

	// Rules recorded in the log: they apply to commands after the node
	// records them, never to a replay.
	{"max-ttl", "rule: largest lease TTL accepted",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.Rules.MaxTTL })},
	{"max-lock-delay", "rule: largest lock_delay an acquire may ask for (0: 24h, the format's bound)",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.Rules.MaxLockDelay })},
	{"max-waiters-per-lock", "rule: most queued acquires on one lock (0: no cap)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxWaitersPerLock })},
	{"max-waiters", "rule: most queued acquires on all locks (0: no cap)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxWaiters })},
	{"max-resources", "rule: most fenced resources, deleted ones included (0: no cap)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxResources })},
	{"max-resource-bytes", "rule: most bytes of all fenced resource values (0: no cap)",
		integer64(func(s *serveSettings) *int64 { return &s.cfg.Rules.MaxResourceBytes })},
	{"max-locks", "rule: most locks held, delayed or with waiters (0: no cap)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxLocks })},
	{"max-sessions", "rule: most live client sessions (0: no cap)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxSessions })},
	{"max-sessions-per-principal", "rule: most live sessions one authenticated principal may have open (0: no quota)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxSessionsPerPrincipal })},
	{"max-waiters-per-principal", "rule: most acquires one authenticated principal may have queued (0: no quota)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxWaitersPerPrincipal })},
	{"max-locks-per-principal", "rule: most locks one authenticated principal may hold or wait for, each lock of a set counted (0: no quota)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxLocksPerPrincipal })},
	{"max-ids-per-principal", "rule: most op_ids, and most request_ids, one authenticated principal may have remembered; beyond it its oldest are forgotten once --min-id-retention old (0: no quota)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxIDsPerPrincipal })},
	{"max-session-results", "rule: most unacknowledged saved results on one session (0: no cap)",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxSessionResults })},
	{"id-retention", "rule: an op_id or request_id is remembered at most this long",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.Rules.IDRetention })},
	{"min-id-retention", "rule: an id is remembered at least this long; when memory is full of younger ids, new ids are refused (RESOURCE_EXHAUSTED)",
		dur(func(s *serveSettings) *time.Duration { return &s.cfg.Rules.MinIDRetention })},
	{"max-ids", "rule: most op_ids, and most request_ids, remembered",
		integer(func(s *serveSettings) *int { return &s.cfg.Rules.MaxOps })}, // and MaxRequests: daemonConfig
}

// newServeSettings is the settings before any flag: the daemon's
// defaults, text logs at info.
func newServeSettings() *serveSettings {
	s := &serveSettings{cfg: daemon.DefaultConfig(), logFormat: logFormats[0], logLevel: logLevels[0], memoryLimit: "auto"}
	s.cf.nodeID = s.cfg.NodeID
	return s
}

// daemonConfig is the daemon's configuration the parsed flags give: the
// node id is checked with the cluster flags and kept there, and --max-ids
// caps both id memories (op_ids and request_ids).
func (s *serveSettings) daemonConfig() daemon.Config {
	c := s.cfg
	c.NodeID = s.cf.nodeID
	c.Rules.MaxRequests = c.Rules.MaxOps
	return c
}

// defineServeFlags defines every row of serveFlagTable on fs, bound to s.
func defineServeFlags(fs *flag.FlagSet, s *serveSettings) {
	for _, f := range serveFlagTable {
		fs.Var(f.value(s), f.name, f.usage)
	}
}

// The binders of the table's rows: each wraps the flag package's own
// Value of its type around the place the row names (the standard
// flag.Value types are unexported, so a FlagSet makes them).
func str(p func(*serveSettings) *string) func(*serveSettings) flag.Value {
	return func(s *serveSettings) flag.Value {
		return bound(func(fs *flag.FlagSet) { fs.StringVar(p(s), "v", *p(s), "") })
	}
}

func dur(p func(*serveSettings) *time.Duration) func(*serveSettings) flag.Value {
	return func(s *serveSettings) flag.Value {
		return bound(func(fs *flag.FlagSet) { fs.DurationVar(p(s), "v", *p(s), "") })
	}
}

func integer(p func(*serveSettings) *int) func(*serveSettings) flag.Value {
	return func(s *serveSettings) flag.Value {
		return bound(func(fs *flag.FlagSet) { fs.IntVar(p(s), "v", *p(s), "") })
	}
}

func integer64(p func(*serveSettings) *int64) func(*serveSettings) flag.Value {
	return func(s *serveSettings) flag.Value {
		return bound(func(fs *flag.FlagSet) { fs.Int64Var(p(s), "v", *p(s), "") })
	}
}

func boolean(p func(*serveSettings) *bool) func(*serveSettings) flag.Value {
	return func(s *serveSettings) flag.Value {
		return bound(func(fs *flag.FlagSet) { fs.BoolVar(p(s), "v", *p(s), "") })
	}
}

func oneOf(choices []string, p func(*serveSettings) *string) func(*serveSettings) flag.Value {
	return func(s *serveSettings) flag.Value { return enumValue{p(s), choices} }
}

// bound is the Value define puts on a scratch FlagSet under the name "v".
func bound(define func(fs *flag.FlagSet)) flag.Value {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	define(fs)
	return fs.Lookup("v").Value
}
