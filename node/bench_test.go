package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// BenchmarkApplyAcquireRelease measures acquire+release cycles on distinct
// locks straight through Node.Apply (raft, durable log with fsync, FSM): the
// node's share of the API benchmark in server/, without HTTP.
func BenchmarkApplyAcquireRelease(b *testing.B) {
	for _, store := range []string{LogStoreWAL} {
		for _, proposers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("store=%s/proposers=%d", store, proposers), func(b *testing.B) {
				benchApply(b, Config{LogStore: store}, proposers)
			})
		}
	}
}

// BenchmarkGroupsInFlight is BenchmarkApplyAcquireRelease on the WAL with
// 1, 2 or 4 command groups in flight (group.go; the default is
// groupsInFlight).
func BenchmarkGroupsInFlight(b *testing.B) {
	for _, inFlight := range []int{1, 2, 4} {
		for _, proposers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("groups=%d/proposers=%d", inFlight, proposers), func(b *testing.B) {
				benchApply(b, Config{LogStore: LogStoreWAL, groupsInFlight: inFlight}, proposers)
			})
		}
	}
}

// benchApply runs acquire+release cycles on distinct locks from proposers
// goroutines through a node opened with cfg (its DataDir and Logger set
// here).
func benchApply(b *testing.B, cfg Config, proposers int) {
	cfg.DataDir, cfg.Logger = b.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	var batches, entries atomic.Int64
	n.OnBatch(func(e int) { batches.Add(1); entries.Add(int64(e)) })
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range proposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				name := fmt.Sprintf("bench-%d", i)
				res, err := n.Apply(ctx, state.Command{Op: state.OpAcquire, Name: name, Owner: "bench", TTL: time.Minute})
				if err == nil && res.Err == nil {
					res, err = n.Apply(ctx, state.Command{Op: state.OpRelease, Name: name, Token: res.Lease.Token})
				}
				if err == nil {
					err = res.Err
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/cycle")
	if nb := batches.Load(); nb > 0 {
		b.ReportMetric(float64(entries.Load())/float64(nb), "entries/batch")
	}
	if g := n.props.groups.Load(); g > 0 {
		b.ReportMetric(float64(n.props.commands.Load())/float64(g), "cmds/entry")
	}
}

// BenchmarkRestartAfterOps measures how long Open takes (snapshot restore,
// log tail replay, election, takeoffice) on a data dir that has seen
// FENCE_RESTART_OPS operations (default 1,000,000: half adds with an op_id,
// half without, from 64 proposers), with the default snapshot triggers. Run
// it alone: go test -run '^$' -bench RestartAfterOps -benchtime 3x ./node/
func BenchmarkRestartAfterOps(b *testing.B) {
	ops := 1_000_000
	if v := os.Getenv("FENCE_RESTART_OPS"); v != "" {
		var err error
		if ops, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	cfg := Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	n, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	res, err := n.Apply(ctx, state.Command{Op: state.OpAcquire, Name: "l", Owner: "bench", TTL: time.Hour})
	if err != nil || res.Err != nil {
		b.Fatal(err, res.Err)
	}
	tok := res.Lease.Token
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	loadStart := time.Now()
	for p := 0; p < 64; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(ops) {
					return
				}
				cmd := state.Command{Op: state.OpAdd, Name: fmt.Sprintf("r-%d", i%1000), Token: tok, Delta: 1}
				if i%2 == 0 {
					cmd.OpID = fmt.Sprintf("op-%d", i)
				}
				res, err := n.Apply(ctx, cmd)
				if err == nil {
					err = res.Err
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	load := time.Since(loadStart)
	st := n.Status()
	n.Close()
	b.Logf("%d ops in %s (%.0f ops/s), %d snapshots, last index %d", ops, load.Round(time.Millisecond), float64(ops)/load.Seconds(), st.Snapshots, st.CommitIndex)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		n, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		b.Logf("restart: %s, restored %d snapshot(s), last token %d", elapsed.Round(time.Millisecond), n.fsm.restores.Load(), n.LastToken())
		n.Close()
		b.StartTimer()
	}
}
