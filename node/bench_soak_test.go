package node

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// BenchmarkSteadyIDLoad runs the cycle of issue 24's soak against one node
// — on each of 8 sessions, over 504 resources (a multiple of the 8 workers: no two share a lock): a session acquire, a write
// and an add with op_ids (36-byte UUIDs), a release — FENCE_SOAK_CYCLES
// times (default 20,000; every op_id is remembered: the state grows as
// the soak's did before its memory was full), and reports per cycle the
// command data the log gained and the snapshot bytes written, the
// snapshots taken, the last snapshot's size and the id memory's bytes.
// Snapshot writes a second at a given cycle rate are snapshot_B/cycle
// times that rate. Run:
//
//	go test -run '^$' -bench SteadyIDLoad -benchtime 1x ./node/
func BenchmarkSteadyIDLoad(b *testing.B) {
	cycles := 20_000
	if v, err := strconv.Atoi(os.Getenv("FENCE_SOAK_CYCLES")); err == nil && v > 0 {
		cycles = v
	}
	rules := state.DefaultConfig()
	for range b.N {
		n, err := Open(Config{DataDir: b.TempDir(), Logger: quietLogger(), Rules: rules})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		const workers = 8
		var wg sync.WaitGroup
		var fail error
		var mu sync.Mutex
		stored0, written0 := n.log.Stored(), n.snap.written.Load()
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := openSession(b, n, time.Hour)
				seq := uint64(0)
				do := func(c state.Command) state.Result {
					seq++
					c.Session, c.Seq, c.Ack = s, seq, seq
					r, err := n.Apply(ctx, c)
					if err == nil && r.Err != nil {
						err = r.Err
					}
					if err != nil {
						mu.Lock()
						fail = err
						mu.Unlock()
					}
					return r
				}
				for i := w; i < cycles; i += workers {
					res := fmt.Sprintf("orders/customer-%04d/stock", i%504)
					r := do(state.Command{Op: state.OpAcquire, Name: "lock-" + res, Owner: "soak"})
					if r.Lease == nil {
						return
					}
					tok := r.Lease.Token
					do(state.Command{Op: state.OpWrite, Name: res, Token: tok, Value: []byte("v"), OpID: fmt.Sprintf("6f1c2a4e-9b3d-4c1e-8f2a-%012d", 2*i)})
					do(state.Command{Op: state.OpAdd, Name: res + "/n", Token: tok, Delta: 1, OpID: fmt.Sprintf("6f1c2a4e-9b3d-4c1e-8f2a-%012d", 2*i+1)})
					do(state.Command{Op: state.OpRelease, Name: "lock-" + res, Token: tok})
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		if fail != nil {
			b.Fatal(fail)
		}
		st := n.Status()
		b.ReportMetric(float64(n.log.Stored()-stored0)/float64(cycles), "log_B/cycle")
		b.ReportMetric(float64(n.snap.written.Load()-written0)/float64(cycles), "snapshot_B/cycle")
		b.ReportMetric(float64(st.Snapshots), "snapshots")
		b.ReportMetric(float64(n.log.Entries())/float64(cycles), "logged_commands/cycle")
		b.ReportMetric(float64(st.SnapshotBytes), "last_snapshot_B")
		b.ReportMetric(float64(st.IDMemory.Ops), "op_ids")
		b.ReportMetric(float64(st.IDMemory.Bytes), "id_memory_B")
		b.ReportMetric(float64(cycles)/took.Seconds(), "cycles/s")
		n.Close()
	}
}
