package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/daemon"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/state"
)

// serveOptions are serve's flags, as serveFlags defines them.
type serveOptions struct {
	listen, dataDir, logStore, logFormat, logLevel                             *string
	readyTimeout, waiterGrace                                                  *time.Duration
	cf                                                                         *clusterFlags
	maxConns, maxStreams, maxStreamRequests                                    *int
	readHeaderTimeout, readTimeout, idleTimeout, writeTimeout                  *time.Duration
	maxTTL, idRetention, minIDRetention                                        *time.Duration
	maxWaitersPerLock, maxWaiters, maxResources, maxLocks, maxSessions, maxIDs *int
	maxSessionResults                                                          *int
	maxResourceBytes                                                           *int64
}

// serveFlags defines serve's flags (each also from its FENCE_ variable:
// serve_env.go).
func serveFlags(g *globals, stderr io.Writer) (*flag.FlagSet, *serveOptions) {
	o := &serveOptions{}
	dc := daemon.DefaultConfig()
	fs := newFlagSetWith("serve", "[--listen ADDR] [--data-dir DIR] [--log-store wal] [--log-format text|json] [--log-level L] [cluster flags] [limits and rules, see below]", g, stderr, nil)
	o.listen = fs.String("listen", dc.Listen, "TCP address to listen on (a non-loopback address gets a warning: there is no TLS and no auth)")
	o.dataDir = fs.String("data-dir", dc.DataDir, "directory for the raft log and snapshots")
	o.logStore = fs.String("log-store", "", "raft log store: wal, the only one (a dir holding a raft-boltdb raft.db is refused)")
	o.logFormat = enum(fs, "log-format", logFormats, "log `format` on stderr: text (key=value) or json (one object a line)")
	o.logLevel = enum(fs, "log-level", logLevels, "least important log `level` shown: debug (also every refused request), info, warn or error")
	o.readyTimeout = fs.Duration("ready-timeout", dc.ReadyTimeout, "how long to wait for the node to replay its log and take office (a single node), or to be added (--join), before giving up (exit 1)")
	o.waiterGrace = fs.Duration("waiter-grace", dc.WaiterGrace, "after taking office, how long queued acquires have to be retried by their clients before they are dropped")

	// Cluster (serve_cluster.go). Without --raft-addr: a single node.
	o.cf = registerClusterFlags(fs)

	// Connection limits (this process only).
	o.maxConns = fs.Int("max-conns", dc.MaxConns, "most client connections open at once; more wait to be accepted")
	o.maxStreams = fs.Int("max-streams", dc.MaxStreams, "most session streams open at once; more are refused (RESOURCE_EXHAUSTED)")
	o.maxStreamRequests = fs.Int("max-stream-requests", dc.MaxStreamRequests, "most requests in flight on one session stream; more are answered RESOURCE_EXHAUSTED and resent by the client")
	o.readHeaderTimeout = fs.Duration("read-header-timeout", dc.ReadHeaderTimeout, "time allowed to read a request's header")
	o.readTimeout = fs.Duration("read-timeout", dc.ReadTimeout, "time allowed to read a whole request, body included (not a blocking acquire's wait)")
	o.idleTimeout = fs.Duration("idle-timeout", dc.IdleTimeout, "close a keep-alive connection idle this long")
	o.writeTimeout = fs.Duration("write-timeout", dc.WriteTimeout, "time allowed to write a reply once it is ready (a blocking acquire's once its wait ends); a client that does not read loses its connection")

	// Rules recorded in the log: they apply to commands after the node
	// records them, never to a replay.
	def := dc.Rules
	o.maxTTL = fs.Duration("max-ttl", def.MaxTTL, "rule: largest lease TTL accepted")
	o.maxWaitersPerLock = fs.Int("max-waiters-per-lock", def.MaxWaitersPerLock, "rule: most queued acquires on one lock (0: no cap)")
	o.maxWaiters = fs.Int("max-waiters", def.MaxWaiters, "rule: most queued acquires on all locks (0: no cap)")
	o.maxResources = fs.Int("max-resources", def.MaxResources, "rule: most fenced resources, deleted ones included (0: no cap)")
	o.maxResourceBytes = fs.Int64("max-resource-bytes", def.MaxResourceBytes, "rule: most bytes of all fenced resource values (0: no cap)")
	o.maxLocks = fs.Int("max-locks", def.MaxLocks, "rule: most locks held, delayed or with waiters (0: no cap)")
	o.maxSessions = fs.Int("max-sessions", def.MaxSessions, "rule: most live client sessions (0: no cap)")
	o.maxSessionResults = fs.Int("max-session-results", def.MaxSessionResults, "rule: most unacknowledged saved results on one session (0: no cap)")
	o.idRetention = fs.Duration("id-retention", def.IDRetention, "rule: an op_id or request_id is remembered at most this long")
	o.minIDRetention = fs.Duration("min-id-retention", def.MinIDRetention, "rule: an id is remembered at least this long; when memory is full of younger ids, new ids are refused (RESOURCE_EXHAUSTED)")
	o.maxIDs = fs.Int("max-ids", def.MaxOps, "rule: most op_ids, and most request_ids, remembered")

	annotateEnv(fs)
	flagsUsage := fs.Usage
	fs.Usage = func() {
		flagsUsage()
		fmt.Fprint(fs.Output(), serveUsageNotes)
	}
	return fs, o
}

// parseServe parses serve's arguments, then fills each flag not given
// from its FENCE_ variable (applyEnv).
func parseServe(fs *flag.FlagSet, args []string, getenv func(string) string) (envSource, error) {
	if _, err := parseExact(fs, args); err != nil {
		return nil, err
	}
	return applyEnv(fs, getenv)
}

// serveCmd runs a server until SIGINT or SIGTERM, then shuts it down
// gracefully: a single node, or with --raft-addr a node of a cluster.
func serveCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs, o := serveFlags(g, stderr)
	// A refused start is one line: with --log-format json a JSON record
	// ("start refused", err), so that a JSON log stays JSON; in text the
	// CLI's "fence: serve: ..." line, as every command's usage errors.
	refuse := func(err error) int {
		if *o.logFormat == "json" {
			newLogger(stderr, "json", "error", new(atomic.Bool)).Error("start refused", "err", err.Error())
			return exitCodeOf(err)
		}
		return fail(g, stdout, stderr, err)
	}
	src, err := parseServe(fs, args, os.Getenv)
	if err != nil {
		var usage *usageError
		if errors.As(err, &usage) { // a bad variable
			return refuse(err)
		}
		return usageExit(err) // the flag package printed why, and the usage
	}
	// A refusal below names flags; one a variable set is said to be so.
	usage := func(msg string) int { return refuse(&usageError{src.explain(msg)}) }
	if *o.maxTTL < fence.MinTTL {
		return usage(fmt.Sprintf("serve: --max-ttl must be at least %s", fence.MinTTL))
	}
	cfg := o.daemonConfig()
	if err := cfg.Validate(); err != nil {
		return usage("serve: " + flagError(err))
	}
	clusterCfg, hooks, err := o.cf.config(os.Getenv)
	if err != nil {
		return usage("serve: " + err.Error())
	}
	if err := o.cf.checkRestored(*o.dataDir); err != nil {
		return usage("serve: " + err.Error())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var started atomic.Bool
	logger := newLogger(stderr, *o.logFormat, *o.logLevel, &started)
	for _, v := range testHooksSet(os.Getenv) {
		logger.Warn("test-only hook set in the environment (never in production)", "var", v)
	}
	for _, u := range unknownEnv(fs, os.Environ()) {
		args := []any{"var", u[0]}
		if u[1] != "" {
			args = append(args, "did_you_mean", u[1])
		}
		logger.Warn("unknown FENCE_ variable ignored (no fence serve flag reads it)", args...)
	}
	if len(src) > 0 {
		logger.Info("flags from the environment", "set", strings.Join(slices.Sorted(maps.Values(src)), " "))
	}
	cfg.Logger, cfg.Cluster = logger, clusterCfg
	err = daemon.Run(ctx, cfg, daemon.WithHooks(hooks))
	if errors.Is(err, node.ErrNotLeader) && clusterCfg.RaftAddr == "" {
		// Open gave up waiting for the node to take office.
		err = fmt.Errorf("serve: gave up after --ready-timeout %s: %w (a large log takes longer to replay: raise --ready-timeout)", *o.readyTimeout, err)
	}
	if err != nil {
		// One line with the reason, in the log's format, then exit.
		if started.Load() {
			logger.Error("stopped on an error", "err", err)
		} else {
			logger.Error("start refused", "err", err)
		}
		return exitCodeOf(err)
	}
	return exitOK
}

// daemonConfig is the daemon's configuration the parsed flags give; the
// settings no flag sets keep daemon.DefaultConfig's values.
func (o *serveOptions) daemonConfig() daemon.Config {
	cfg := daemon.Config{
		Listen: *o.listen, DataDir: *o.dataDir, LogStore: *o.logStore,
		NodeID: o.cf.nodeID,
		Rules: state.Config{
			MaxTTL: *o.maxTTL, MaxOps: *o.maxIDs, MaxRequests: *o.maxIDs, IDRetention: *o.idRetention, MinIDRetention: *o.minIDRetention,
			MaxWaitersPerLock: *o.maxWaitersPerLock, MaxWaiters: *o.maxWaiters, MaxResources: *o.maxResources, MaxResourceBytes: *o.maxResourceBytes,
			MaxLocks: *o.maxLocks, MaxSessions: *o.maxSessions, MaxSessionResults: *o.maxSessionResults,
		},
		ReadyTimeout: *o.readyTimeout, WaiterGrace: *o.waiterGrace,
		MaxConns: *o.maxConns, MaxStreams: *o.maxStreams, MaxStreamRequests: *o.maxStreamRequests, ReadHeaderTimeout: *o.readHeaderTimeout, ReadTimeout: *o.readTimeout, IdleTimeout: *o.idleTimeout, WriteTimeout: *o.writeTimeout,
	}
	def := daemon.DefaultConfig()
	cfg.ShutdownTimeout, cfg.LockTimeout = def.ShutdownTimeout, def.LockTimeout
	return cfg
}

// flagError names the flag of a state.Config field refused by Validate
// ("config.max_ttl" is --max-ttl; max_ops and max_requests are --max-ids).
func flagError(err error) string {
	var inv *fence.InvalidError
	if !errors.As(err, &inv) {
		return err.Error()
	}
	name := strings.TrimPrefix(inv.Field, "config.")
	if name == "max_ops" || name == "max_requests" {
		name = "max_ids"
	}
	msg := "--" + strings.ReplaceAll(name, "_", "-") + " must be " + inv.Bound
	if inv.Value != "" {
		msg += " (got " + inv.Value + ")"
	}
	return msg
}
