package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/fenceworks/fence/testkit/chaos"
)

// workerMain runs `fence-chaos worker ARGS` (chaos.ParseWorkerArgs): one
// worker process of a run, recording its history until SIGTERM or SIGINT,
// then releasing what it holds and exiting 0. Exit 2: bad arguments; 1: the
// worker could not run (no history file, no PostgreSQL, a recorder error).
func workerMain(args []string) int {
	cfg, err := chaos.ParseWorkerArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fence-chaos worker:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := chaos.RunWorker(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "fence-chaos worker %d: %v\n", cfg.ID, err)
		return 1
	}
	return 0
}
