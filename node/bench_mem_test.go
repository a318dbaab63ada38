package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/state"
)

// BenchmarkApplyMemLog is BenchmarkApplyAcquireRelease with the raft log in
// memory (no fsync), with 1 or 2 command groups in flight: the CPU cost
// per command of the node's path (futures, encoding, log entries, FSM
// dispatch), which is what group commit saves when the disk is fast or the
// CPU is the limit.
func BenchmarkApplyMemLog(b *testing.B) {
	for _, inFlight := range []int{1, 2} {
		for _, proposers := range []int{1, 16, 64, 256} {
			b.Run(fmt.Sprintf("groups=%d/proposers=%d", inFlight, proposers), func(b *testing.B) {
				benchMemLog(b, proposers, inFlight)
			})
		}
	}
}

func benchMemLog(b *testing.B, proposers, inFlight int) {
	n, err := Open(Config{DataDir: b.TempDir(), Logger: quietLogger(), groupsInFlight: inFlight,
		wrapLog: func(raft.LogStore) raft.LogStore { return raft.NewInmemStore() }})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
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
}
