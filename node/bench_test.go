package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// BenchmarkApplyAcquireRelease measures acquire+release cycles on distinct
// locks straight through Node.Apply (raft, durable log with fsync, FSM): the
// node's share of the API benchmark in server/, without HTTP, for each log
// store.
func BenchmarkApplyAcquireRelease(b *testing.B) {
	for _, store := range []string{LogStoreWAL, LogStoreBolt} {
		for _, proposers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("store=%s/proposers=%d", store, proposers), func(b *testing.B) {
				benchApply(b, store, proposers)
			})
		}
	}
}

func benchApply(b *testing.B, store string, proposers int) {
	n, err := Open(Config{DataDir: b.TempDir(), LogStore: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	start := time.Now()
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
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
	if nb := batches.Load(); nb > 0 {
		b.ReportMetric(float64(entries.Load())/float64(nb), "entries/batch")
	}
}
