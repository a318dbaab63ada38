package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// soakCycles runs issue 24's soak cycle (a session acquire, a write and an
// add with op_ids, a release) cycles times on 8 sessions over 504
// resources, ids numbered from first: the state of the soak (sessions,
// remembered op_ids, locks and values).
func soakCycles(tb testing.TB, n *Node, first, cycles int) {
	ctx := context.Background()
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fail error
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := openSession(tb, n, time.Hour)
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
			for i := first + w; i < first+cycles; i += workers {
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
	if fail != nil {
		tb.Fatal(fail)
	}
}

var (
	reRestored = regexp.MustCompile(`msg="snapshot restored" bytes=(\d+) took=(\S+)`)
	reReplayed = regexp.MustCompile(`msg="log replayed" entries=(\d+) .*?took=(\S+)`)
	reParts    = regexp.MustCompile(` (storage|raft_start|wait|apply)=(\S+)`)
)

// BenchmarkRestartReplay measures a durable single node's restart: a
// state like issue 24's soak (FENCE_REPLAY_STATE cycles, default 50,000:
// 100,000 remembered op_ids, 8 sessions, 504 locks) in its last snapshot,
// FENCE_REPLAY_TAIL cycles (default 5,000) in the log after it, closed and
// opened again b.N times. It reports the time Open takes (a single node is
// ready once it leads and has applied its log), and the parts the node
// logs: the snapshot restore, the wait before the first entry is applied
// (raft's start and election), and the apply of the log tail. With
// FENCE_REPLAY_PROFILE=FILE it writes a CPU profile of the reopens. Run:
//
//	go test -run '^$' -bench RestartReplay -benchtime 5x ./node/
func BenchmarkRestartReplay(b *testing.B) {
	stateCycles, tail := 50_000, 5_000
	if v, err := strconv.Atoi(os.Getenv("FENCE_REPLAY_STATE")); err == nil && v > 0 {
		stateCycles = v
	}
	if v, err := strconv.Atoi(os.Getenv("FENCE_REPLAY_TAIL")); err == nil && v > 0 {
		tail = v
	}
	dir := b.TempDir()
	cfg := Config{DataDir: dir, Logger: quietLogger(), SnapshotThreshold: 1 << 40, SnapshotBytes: 1 << 40}
	n, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	soakCycles(b, n, 0, stateCycles)
	if err := n.raft.Snapshot().Error(); err != nil {
		b.Fatal(err)
	}
	soakCycles(b, n, stateCycles, tail)
	last, _ := n.log.LastIndex()
	snapIndex := n.raft.Stats()["last_snapshot_index"]
	if err := n.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("log: last index %d, last snapshot at %s", last, snapIndex)
	if p := os.Getenv("FENCE_REPLAY_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var open, restore, replay time.Duration
	parts := map[string]time.Duration{}
	var entries int
	b.ResetTimer()
	for range b.N {
		lines := &logLines{}
		cfg.Logger = slog.New(slog.NewTextHandler(lines, nil))
		start := time.Now()
		n, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		open += time.Since(start)
		for deadline := time.Now().Add(time.Minute); !reReplayed.MatchString(lines.String()); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("no log replayed line:\n%s", lines)
			}
		}
		out := lines.String()
		if m := reRestored.FindStringSubmatch(out); m != nil {
			d, _ := time.ParseDuration(m[2])
			restore += d
		}
		m := reReplayed.FindStringSubmatch(out)
		k, _ := strconv.Atoi(m[1])
		entries = k
		d, _ := time.ParseDuration(m[2])
		replay += d
		for _, p := range reParts.FindAllStringSubmatch(out, -1) { // the parts, where the node logs them
			d, _ := time.ParseDuration(p[2])
			parts[p[1]] += d
		}
		if err := n.Close(); err != nil {
			b.Fatal(err)
		}
		if b.N == 1 || os.Getenv("FENCE_REPLAY_LOG") != "" {
			b.Logf("restart log:\n%s", out)
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(per(open), "open_ms")
	b.ReportMetric(per(restore), "restore_ms")
	b.ReportMetric(per(replay), "replayed_ms")
	for _, p := range []string{"storage", "raft_start", "wait", "apply"} {
		if d, ok := parts[p]; ok {
			b.ReportMetric(per(d), p+"_ms")
		}
	}
	b.ReportMetric(float64(entries), "entries")
	b.ReportMetric(float64(replay.Microseconds())/float64(b.N)/float64(max(entries, 1)), "replay_µs/entry")
}
