package state

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"
)

// BenchmarkSnapshotMillionOps: a machine remembering 1,000,000 op_ids
// (DefaultConfig's MaxOps, the soak's full id memory). restore: the time
// of one Restore (ns/op), a restart's cost; write: one Snapshot to a
// writer that reads the heap at every chunk it is given, reporting the
// heap before (after a GC) and the most seen during the write — the
// node's heap during a snapshot.
func BenchmarkSnapshotMillionOps(b *testing.B) {
	m := NewWithConfig(DefaultConfig())
	m.Apply(Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Hour})
	for i := range 1_000_000 {
		m.Apply(Command{Op: OpWrite, Name: fmt.Sprintf("r%d", i%1024), Token: 1, Value: []byte("7"), OpID: fmt.Sprintf("%026d", i)})
	}
	var buf bytes.Buffer
	if err := m.Snapshot(&buf); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.Run("restore", func(b *testing.B) {
		for b.Loop() {
			if err := New().Restore(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(data))/(1<<20), "snapshot_MiB")
	})
	b.Run("write", func(b *testing.B) {
		var base, peak uint64
		for b.Loop() {
			runtime.GC()
			w := &heapWatcher{}
			base = w.heap()
			if err := m.Snapshot(w); err != nil {
				b.Fatal(err)
			}
			peak = max(peak, w.peak)
		}
		b.ReportMetric(float64(base)/(1<<20), "heap_before_MiB")
		b.ReportMetric(float64(peak)/(1<<20), "heap_peak_MiB")
	})
}

// heapWatcher discards what it is given, noting the largest heap seen
// at each write.
type heapWatcher struct{ peak uint64 }

func (w *heapWatcher) heap() uint64 {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return s.HeapAlloc
}

func (w *heapWatcher) Write(p []byte) (int, error) {
	w.peak = max(w.peak, w.heap())
	return io.Discard.Write(p)
}
