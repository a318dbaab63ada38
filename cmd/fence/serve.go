package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/server"
	"github.com/fenceworks/fence/state"
)

// serveCmd runs a server until SIGINT or SIGTERM, then shuts it down
// gracefully: a single node, or with --raft-addr a node of a cluster.
func serveCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", "[--listen ADDR] [--data-dir DIR] [--log-store wal|bolt] [cluster flags] [limits and rules, see below]", g, stderr)
	listen := fs.String("listen", server.DefaultListen, "TCP address to listen on (a non-loopback address gets a warning: there is no TLS and no auth)")
	dataDir := fs.String("data-dir", server.DefaultDataDir, "directory for the raft log and snapshots")
	logStore := fs.String("log-store", "", "raft log store of a new data dir: wal (default) or bolt; an existing dir keeps its own")
	readyTimeout := fs.Duration("ready-timeout", 10*time.Second, "how long to wait for the node to replay its log and take office (a single node), or to be added (--join), before giving up (exit 1)")
	waiterGrace := fs.Duration("waiter-grace", 5*time.Second, "after taking office, how long queued acquires have to be retried by their clients before they are dropped")

	// Cluster (serve_cluster.go). Without --raft-addr: a single node.
	cf := registerClusterFlags(fs)
	flagsUsage := fs.Usage
	fs.Usage = func() {
		flagsUsage()
		fmt.Fprint(fs.Output(), serveUsageNotes)
	}

	// Connection limits (this process only).
	maxConns := fs.Int("max-conns", server.DefaultMaxConns, "most client connections open at once; more wait to be accepted")
	maxStreams := fs.Int("max-streams", server.DefaultMaxStreams, "most session streams open at once; more are refused (RESOURCE_EXHAUSTED)")
	maxStreamRequests := fs.Int("max-stream-requests", server.DefaultMaxStreamRequests, "most requests in flight on one session stream; more are answered RESOURCE_EXHAUSTED and resent by the client")
	readHeaderTimeout := fs.Duration("read-header-timeout", server.DefaultReadHeaderTimeout, "time allowed to read a request's header")
	readTimeout := fs.Duration("read-timeout", server.DefaultReadTimeout, "time allowed to read a whole request, body included (not a blocking acquire's wait)")
	idleTimeout := fs.Duration("idle-timeout", server.DefaultIdleTimeout, "close a keep-alive connection idle this long")
	writeTimeout := fs.Duration("write-timeout", server.DefaultWriteTimeout, "time allowed to write a reply once it is ready (a blocking acquire's once its wait ends); a client that does not read loses its connection")

	// Rules recorded in the log: they apply to commands after the node
	// records them, never to a replay.
	def := state.DefaultConfig()
	maxTTL := fs.Duration("max-ttl", def.MaxTTL, "rule: largest lease TTL accepted")
	maxWaitersPerLock := fs.Int("max-waiters-per-lock", def.MaxWaitersPerLock, "rule: most queued acquires on one lock (0: no cap)")
	maxWaiters := fs.Int("max-waiters", def.MaxWaiters, "rule: most queued acquires on all locks (0: no cap)")
	maxResources := fs.Int("max-resources", def.MaxResources, "rule: most fenced resources, deleted ones included (0: no cap)")
	maxResourceBytes := fs.Int64("max-resource-bytes", def.MaxResourceBytes, "rule: most bytes of all fenced resource values (0: no cap)")
	maxLocks := fs.Int("max-locks", def.MaxLocks, "rule: most locks held, delayed or with waiters (0: no cap)")
	maxSessions := fs.Int("max-sessions", def.MaxSessions, "rule: most live client sessions (0: no cap)")
	maxSessionResults := fs.Int("max-session-results", def.MaxSessionResults, "rule: most unacknowledged saved results on one session (0: no cap)")
	idRetention := fs.Duration("id-retention", def.IDRetention, "rule: an op_id or request_id is remembered at most this long")
	minIDRetention := fs.Duration("min-id-retention", def.MinIDRetention, "rule: an id is remembered at least this long; when memory is full of younger ids, new ids are refused (RESOURCE_EXHAUSTED)")
	maxIDs := fs.Int("max-ids", def.MaxOps, "rule: most op_ids, and most request_ids, remembered")
	if _, err := parseExact(fs, args); err != nil {
		return usageExit(err)
	}
	if *maxTTL < fence.MinTTL {
		return fail(g, stdout, stderr, &usageError{fmt.Sprintf("serve: --max-ttl must be at least %s", fence.MinTTL)})
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ready-timeout", *readyTimeout}, {"read-header-timeout", *readHeaderTimeout}, {"read-timeout", *readTimeout}, {"idle-timeout", *idleTimeout}, {"write-timeout", *writeTimeout}} {
		if d.v <= 0 {
			return fail(g, stdout, stderr, &usageError{fmt.Sprintf("serve: --%s must be more than 0", d.name)})
		}
	}
	if *waiterGrace <= 0 {
		// 0 is refused, not read as "no grace": the node takes 0 as its
		// default (5s), and a client retrying a wait needs some time anyway.
		return fail(g, stdout, stderr, &usageError{"serve: --waiter-grace must be more than 0"})
	}
	if *maxStreams < 1 || *maxStreamRequests < 1 {
		return fail(g, stdout, stderr, &usageError{"serve: --max-streams and --max-stream-requests must be at least 1"})
	}
	if *maxConns < 1 {
		return fail(g, stdout, stderr, &usageError{"serve: --max-conns must be at least 1"})
	}
	rules := state.Config{
		MaxTTL: *maxTTL, MaxOps: *maxIDs, MaxRequests: *maxIDs, IDRetention: *idRetention, MinIDRetention: *minIDRetention,
		MaxWaitersPerLock: *maxWaitersPerLock, MaxWaiters: *maxWaiters, MaxResources: *maxResources, MaxResourceBytes: *maxResourceBytes,
		MaxLocks: *maxLocks, MaxSessions: *maxSessions, MaxSessionResults: *maxSessionResults,
	}
	if err := rules.Validate(); err != nil {
		return fail(g, stdout, stderr, &usageError{"serve: " + flagError(err)})
	}
	clusterCfg, err := cf.config(os.Getenv)
	if err != nil {
		return fail(g, stdout, stderr, &usageError{"serve: " + err.Error()})
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	for _, v := range testHooksSet(os.Getenv) {
		logger.Warn("test-only hook set in the environment (never in production)", "var", v)
	}
	err = server.Run(ctx, server.Config{
		Listen: *listen, DataDir: *dataDir, LogStore: *logStore, Logger: logger,
		NodeID: cf.nodeID, Cluster: clusterCfg,
		Rules: rules, ReadyTimeout: *readyTimeout, WaiterGrace: *waiterGrace,
		MaxConns: *maxConns, MaxStreams: *maxStreams, MaxStreamRequests: *maxStreamRequests, ReadHeaderTimeout: *readHeaderTimeout, ReadTimeout: *readTimeout, IdleTimeout: *idleTimeout, WriteTimeout: *writeTimeout,
	})
	if errors.Is(err, node.ErrNotLeader) && clusterCfg.RaftAddr == "" {
		// Open gave up waiting for the node to take office.
		err = fmt.Errorf("serve: gave up after --ready-timeout %s: %w (a large log takes longer to replay: raise --ready-timeout)", *readyTimeout, err)
	}
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	return exitOK
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
