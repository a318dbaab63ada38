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
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/daemon"
	"github.com/fenceworks/fence/node"
)

// serveFlags defines serve's flags, the rows of serveFlagTable (each also
// from its FENCE_ variable: serve_env.go), bound to the settings it
// returns.
func serveFlags(g *globals, stderr io.Writer) (*flag.FlagSet, *serveSettings) {
	s := newServeSettings()
	fs := newFlagSetWith("serve", "[--listen ADDR] [--data-dir DIR] [--log-store wal] [--log-format text|json] [--log-level L] [cluster flags] [limits and rules, see below]", g, stderr, nil)
	defineServeFlags(fs, s)
	annotateEnv(fs)
	flagsUsage := fs.Usage
	fs.Usage = func() {
		flagsUsage()
		fmt.Fprint(fs.Output(), serveUsageNotes)
	}
	return fs, s
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
		if o.logFormat == "json" {
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
	cfg := o.daemonConfig()
	if cfg.Rules.MaxTTL < fence.MinTTL {
		return usage(fmt.Sprintf("serve: --max-ttl must be at least %s", fence.MinTTL))
	}
	if err := cfg.Validate(); err != nil {
		return usage("serve: " + flagError(err))
	}
	memLimit, err := parseMemoryLimit(o.memoryLimit)
	if err != nil {
		return usage("serve: " + flagError(err))
	}
	clusterCfg, hooks, err := o.cf.config(os.Getenv)
	if err != nil {
		return usage("serve: " + err.Error())
	}
	if cfg.PeerTLSEnabled() && clusterCfg.RaftAddr == "" {
		return usage("serve: --peer-cert-file, --peer-key-file and --peer-trusted-ca-file are for the raft port: give --raft-addr (a single node has none)")
	}
	if err := o.cf.checkRestored(cfg.DataDir); err != nil {
		return usage("serve: " + err.Error())
	}
	// A restore killed before it finished left its staging directory: a
	// store started here would begin at token 0, below the backup's.
	if err := node.CheckRestoreLeftover(cfg.DataDir); err != nil {
		return refuse(fmt.Errorf("serve: %w", err))
	}

	// Before anything is created: the data dir holds signing key seeds.
	restrictUmask()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var started atomic.Bool
	logger := newLogger(stderr, o.logFormat, o.logLevel, &started)
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
	ml := chooseMemoryLimit(memLimit, os.Getenv("GOMEMLIMIT"), cgroupMemoryLimit(cgroupLimitFiles))
	applyMemoryLimit(ml)
	switch {
	case ml.Source == "GOMEMLIMIT":
		logger.Info("memory limit from GOMEMLIMIT (it wins over --memory-limit)", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"), "memory_limit_flag", o.memoryLimit)
	case ml.Bytes > 0:
		logger.Info("memory limit", "bytes", ml.Bytes, "from", ml.Source)
	}
	cfg.Logger, cfg.Cluster = logger, clusterCfg
	if cfg.TLSEnabled() || cfg.PeerTLSEnabled() {
		// SIGHUP re-reads the certificate, key and CA files, the client
		// port's and the raft port's (a changed
		// file is also noticed by the next handshake, within a second).
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		cfg.ReloadTLS = hup
	}
	err = daemon.Run(ctx, cfg, daemon.WithHooks(hooks))
	if errors.Is(err, node.ErrNotLeader) && clusterCfg.RaftAddr == "" {
		// Open gave up waiting for the node to take office.
		err = fmt.Errorf("serve: gave up after --ready-timeout %s: %w (a large log takes longer to replay: raise --ready-timeout)", cfg.ReadyTimeout, err)
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

var configFieldRe = regexp.MustCompile(`config\.[a-z_]+`)

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
	// --min-id-retention's upper bound is --id-retention's value.
	bound := inv.Bound
	if hi, ok := strings.CutPrefix(bound, "between 0s and "); ok && name == "min_id_retention" {
		bound = "between 0s and --id-retention (" + hi + ")"
	}
	// A bound naming another setting names its flag.
	bound = configFieldRe.ReplaceAllStringFunc(bound, func(f string) string {
		return "--" + strings.ReplaceAll(strings.TrimPrefix(f, "config."), "_", "-")
	})
	msg := "--" + strings.ReplaceAll(name, "_", "-") + " must be " + bound
	if inv.Value != "" {
		msg += " (got " + inv.Value + ")"
	}
	return msg
}
