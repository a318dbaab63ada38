package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/server"
)

// serveCmd runs a single-node server until SIGINT or SIGTERM, then shuts it
// down gracefully.
func serveCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", "[--listen ADDR] [--data-dir DIR] [--max-ttl D] [--log-store wal|bolt]", g, stderr)
	listen := fs.String("listen", server.DefaultListen, "TCP address to listen on")
	dataDir := fs.String("data-dir", server.DefaultDataDir, "directory for the raft log and snapshots")
	maxTTL := fs.Duration("max-ttl", fence.DefaultMaxTTL, "largest lease TTL accepted")
	logStore := fs.String("log-store", "", "raft log store of a new data dir: wal (default) or bolt; an existing dir keeps its own")
	if _, err := parseExact(fs, args); err != nil {
		return usageExit(err)
	}
	if *maxTTL < fence.MinTTL {
		return fail(g, stdout, stderr, &usageError{fmt.Sprintf("serve: --max-ttl must be at least %s", fence.MinTTL)})
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	err := server.Run(ctx, server.Config{Listen: *listen, DataDir: *dataDir, MaxTTL: *maxTTL, LogStore: *logStore, Logger: logger})
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	return exitOK
}
