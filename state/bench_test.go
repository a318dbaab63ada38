package state

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func BenchmarkApplyAcquireRelease(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := m.Apply(acq(int64(i), "x", "A", time.Second))
		m.Apply(rel(int64(i), "x", r.Lease.Token))
	}
}

// BenchmarkApplyAcquireReleaseManyLocks cycles one lock while 100k others
// are held: the deadline heap keeps each apply O(log n).
func BenchmarkApplyAcquireReleaseManyLocks(b *testing.B) {
	m := New()
	for i := range 100000 {
		m.Apply(acq(0, fmt.Sprint("held-", i), "A", time.Hour))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprint("cycle-", i%1000)
		r := m.Apply(Command{Op: OpAcquire, Now: int64(i), Name: name, Owner: "A", TTL: time.Minute, RequestID: fmt.Sprint("r", i)})
		m.Apply(rel(int64(i), name, r.Lease.Token))
		if _, ok := m.NextDeadline(); !ok {
			b.Fatal("no deadline")
		}
	}
}

func BenchmarkTickExpiry(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := int64(i) * int64(time.Millisecond)
		m.Apply(acq(now, fmt.Sprint("l", i%4096), "A", 10*time.Millisecond))
		m.Apply(tick(now))
	}
}

func BenchmarkEncodeDecode(b *testing.B) {
	c := Command{Op: OpWrite, Now: 1 << 50, Name: "sku-42", Token: fence.Token(1 << 30), Value: []byte("some value of moderate size"), OpID: "op-1234567890"}
	b.ReportAllocs()
	for b.Loop() {
		buf, err := c.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		var d Command
		if err := d.UnmarshalBinary(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIDMemoryBytes measures the heap one remembered id costs: n writes
// with distinct op_ids (26 bytes, as the client's rand.Text ids) to one
// resource, and n acquires with distinct request_ids of one lock, each
// released so its outcome is remembered. Every string of a command is a
// fresh copy, as when commands are decoded from the log. Run it alone, once:
//
//	go test -run XXX -bench IDMemoryBytes -benchtime 1x ./state/
//
// It reports bytes/op_id and bytes/request_id (heap in use after a GC,
// divided by n); the figures are in doc.go (Retention).
func BenchmarkIDMemoryBytes(b *testing.B) {
	// Without a principal (authentication off), and with one: each id
	// then also names it and has a place in its principal's queue
	// (the quota of ids, quota.go).
	for _, p := range []string{"", "token:0123456789abcdef"} {
		name := "anonymous"
		if p != "" {
			name = "principal"
		}
		b.Run(name, func(b *testing.B) { benchIDMemoryBytes(b, p) })
	}
}

func benchIDMemoryBytes(b *testing.B, principal string) {
	const n = 200_000
	id := func(i int) string { return fmt.Sprintf("%026d", i) }
	heap := func() uint64 {
		runtime.GC()
		var s runtime.MemStats
		runtime.ReadMemStats(&s)
		return s.HeapAlloc
	}
	c := DefaultConfig()
	c.MaxIDsPerPrincipal = n
	for range b.N {
		m := NewWithConfig(c)
		m.Apply(Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Hour, Principal: principal})
		before := heap()
		for i := range n {
			m.Apply(Command{Op: OpWrite, Name: strings.Clone("stock"), Token: 1, Value: []byte("7"), OpID: id(i), Principal: principal})
		}
		after := heap()
		if m.ops.len() != n {
			b.Fatalf("%d op_ids remembered", m.ops.len())
		}
		b.ReportMetric(float64(after-before)/n, "bytes/op_id")

		m = NewWithConfig(c)
		before = heap()
		for i := range n {
			r := m.Apply(Command{Op: OpAcquire, Name: strings.Clone("x"), Owner: strings.Clone("worker-1"), TTL: time.Minute, RequestID: id(i), Principal: principal})
			m.Apply(Command{Op: OpRelease, Name: "x", Token: r.Lease.Token, Principal: principal})
		}
		after = heap()
		if m.requests.len() != n {
			b.Fatalf("%d request_ids remembered", m.requests.len())
		}
		b.ReportMetric(float64(after-before)/n, "bytes/request_id")
		runtime.KeepAlive(m)
	}
}

// BenchmarkSnapshotIDs: Snapshot and Restore of a machine remembering
// 300,000 op_ids and 300,000 request outcomes (the bulk of a busy store's
// state). The node takes a snapshot under its read lock, so Snapshot's time
// is a pause of applies; Restore's is part of a restart.
func BenchmarkSnapshotIDs(b *testing.B) {
	m := NewWithConfig(DefaultConfig())
	m.Apply(Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Hour})
	for i := range 300_000 {
		m.Apply(Command{Op: OpWrite, Name: "stock", Token: 1, Value: []byte("7"), OpID: fmt.Sprintf("%026d", i)})
		r := m.Apply(Command{Op: OpAcquire, Name: "y", Owner: "worker-1", TTL: time.Minute, RequestID: fmt.Sprintf("r%025d", i)})
		m.Apply(Command{Op: OpRelease, Name: "y", Token: r.Lease.Token})
	}
	var buf bytes.Buffer
	if err := m.Snapshot(&buf); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			var w bytes.Buffer
			if err := m.Snapshot(&w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("view", func(b *testing.B) { // the copy under the node's lock; WriteTo runs outside it
		for b.Loop() {
			if v := m.SnapshotView(); v == nil {
				b.Fatal("no view")
			}
		}
	})
	b.Run("restore", func(b *testing.B) {
		for b.Loop() {
			if err := New().Restore(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(len(data)), "snapshot_bytes")
}

// BenchmarkSessionBytes: heap per session holding one bound lease, and per
// unacknowledged saved result (a sequenced add), 20,000 sessions.
func BenchmarkSessionBytes(b *testing.B) {
	const n, k = 20_000, 8
	heap := func() uint64 {
		runtime.GC()
		var s runtime.MemStats
		runtime.ReadMemStats(&s)
		return s.HeapAlloc
	}
	for range b.N {
		m := NewWithConfig(DefaultConfig())
		m.Apply(Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Hour})
		before := heap()
		for i := range n {
			r := m.Apply(Command{Op: OpSessionOpen, TTL: time.Hour})
			m.Apply(Command{Op: OpAcquire, Name: fmt.Sprintf("lock-%06d", i), Owner: "worker-1", Session: r.Session.ID})
		}
		mid := heap()
		for i := range n {
			for j := range k {
				m.Apply(Command{Op: OpAdd, Name: "counter", Token: 1, Delta: 1, Session: uint64(i + 1), Seq: uint64(j + 1), Ack: 1})
			}
		}
		after := heap()
		if m.Sessions() != n {
			b.Fatalf("%d sessions", m.Sessions())
		}
		b.ReportMetric(float64(mid-before)/n, "bytes/session+lease")
		b.ReportMetric(float64(after-mid)/(n*k), "bytes/saved_result")
		runtime.KeepAlive(m)
	}
}

// BenchmarkSessionExpiry: one tick ends a session holding 10,000 leases,
// each with a waiter that gets the lock in that tick.
func BenchmarkSessionExpiry(b *testing.B) {
	const k = 10_000
	for b.Loop() {
		b.StopTimer()
		m := NewWithConfig(DefaultConfig())
		s := m.Apply(Command{Op: OpSessionOpen, TTL: time.Second}).Session.ID
		for i := range k {
			name := fmt.Sprintf("lock-%06d", i)
			m.Apply(Command{Op: OpAcquire, Name: name, Owner: "S", Session: s})
			m.Apply(Command{Op: OpAcquire, Name: name, Owner: "W", TTL: time.Minute, Wait: time.Hour, RequestID: name})
		}
		b.StartTimer()
		if r := m.Apply(Command{Op: OpTick, Now: int64(time.Second)}); len(r.Events) != k {
			b.Fatalf("%d events", len(r.Events))
		}
	}
}

// BenchmarkQuotaOpenClose: a session opened and closed by an authenticated
// principal (counted against its quota) and by "" (not counted): the cost
// of the per-principal count.
func BenchmarkQuotaOpenClose(b *testing.B) {
	for _, p := range []string{"", "token:0123456789abcdef"} {
		b.Run("principal="+p, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.MaxSessionsPerPrincipal = 10_000
			m := NewWithConfig(cfg)
			for b.Loop() {
				r := m.Apply(Command{Op: OpSessionOpen, TTL: time.Hour, Principal: p})
				if r.Err != nil {
					b.Fatal(r.Err)
				}
				m.Apply(Command{Op: OpSessionClose, Session: r.Session.ID, Principal: p, Admin: true})
			}
		})
	}
}

// BenchmarkApplySetOf3 acquires and releases an order's three SKUs as one
// set; BenchmarkApplyThreeOneByOne as three leases in name order (what a
// client without sets does: six commands instead of two).
func BenchmarkApplySetOf3(b *testing.B) {
	m := New()
	set := []fence.LockSpec{{Name: "sku/3"}, {Name: "sku/1"}, {Name: "sku/2"}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := m.Apply(Command{Op: OpAcquire, Now: int64(i), Owner: "A", TTL: time.Second, Locks: set})
		m.Apply(rel(int64(i), "sku/2", r.Lease.Token))
	}
}

func BenchmarkApplyThreeOneByOne(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var toks [3]fence.Token
		for j, n := range []string{"sku/1", "sku/2", "sku/3"} {
			toks[j] = m.Apply(acq(int64(i), n, "A", time.Second)).Lease.Token
		}
		for j, n := range []string{"sku/1", "sku/2", "sku/3"} {
			m.Apply(rel(int64(i), n, toks[j]))
		}
	}
}

// BenchmarkApplySharedReaders cycles one of 64 shared holders of a lock.
func BenchmarkApplySharedReaders(b *testing.B) {
	m := New()
	for i := range 63 {
		m.Apply(Command{Op: OpAcquire, Name: "catalog", Mode: fence.Shared, Owner: fmt.Sprint("r", i), TTL: time.Hour})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := m.Apply(Command{Op: OpAcquire, Now: int64(i), Name: "catalog", Mode: fence.Shared, Owner: "A", TTL: time.Hour})
		m.Apply(rel(int64(i), "catalog", r.Lease.Token))
	}
}

// BenchmarkLocksPage100k reads one page of 256 locks from the middle of
// 100,000 held ones under one prefix (a watch's state page, a List page),
// and BenchmarkLocks100kList lists a 1,000-lock prefix among them.
func BenchmarkLocksPage100k(b *testing.B) {
	m := New(uncapped())
	for i := range 100000 {
		m.Apply(acq(0, fmt.Sprintf("p/%06d", i), "A", time.Hour))
	}
	b.ReportAllocs()
	for b.Loop() {
		if page, next := m.LocksPage("p/", "p/050000", 256, 0); len(page) != 256 || next == "" {
			b.Fatal(len(page), next)
		}
	}
}

func BenchmarkLocks100kList(b *testing.B) {
	m := New(uncapped())
	for i := range 100000 {
		m.Apply(acq(0, fmt.Sprintf("p/%06d", i), "A", time.Hour))
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := m.Locks("p/050", 0); len(got) != 1000 {
			b.Fatal(len(got))
		}
	}
}

// BenchmarkIDSnapshotBytes: snapshot bytes per remembered op_id and per
// remembered request_id (36-byte UUID ids, 27-byte resource names, lock
// "x", owner "worker-1"): the snapshot of n ids less the snapshot without them,
// divided by n. A report, no threshold:
//
//	go test -run XXX -bench IDSnapshotBytes -benchtime 1x ./state/
func BenchmarkIDSnapshotBytes(b *testing.B) {
	const n = 100_000
	id := func(i int) string { return fmt.Sprintf("6f1c2a4e-9b3d-4c1e-8f2a-%012d", i) } // a UUID
	size := func(m *Machine) float64 {
		var buf bytes.Buffer
		if err := m.Snapshot(&buf); err != nil {
			b.Fatal(err)
		}
		return float64(buf.Len())
	}
	for range b.N {
		m := NewWithConfig(DefaultConfig())
		m.Apply(Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Hour})
		m.Apply(Command{Op: OpWrite, Name: "orders/customer-0042/stock", Token: 1, Value: []byte("7")})
		m.Apply(Command{Op: OpAdd, Name: "orders/customer-0042/count", Token: 1, Delta: 1})
		before := size(m)
		for i := range n {
			if i%2 == 0 {
				m.Apply(Command{Op: OpWrite, Name: "orders/customer-0042/stock", Token: 1, Value: []byte("7"), OpID: id(i)})
			} else {
				m.Apply(Command{Op: OpAdd, Name: "orders/customer-0042/count", Token: 1, Delta: 1, OpID: id(i)})
			}
		}
		b.ReportMetric((size(m)-before)/n, "snapshot_bytes/op_id")

		m = NewWithConfig(DefaultConfig())
		before = size(m)
		for i := range n {
			r := m.Apply(Command{Op: OpAcquire, Name: "x", Owner: "worker-1", TTL: time.Minute, RequestID: id(i)})
			m.Apply(Command{Op: OpRelease, Name: "x", Token: r.Lease.Token})
		}
		b.ReportMetric((size(m)-before)/n, "snapshot_bytes/request_id")
	}
}

// BenchmarkHeldSessionLeaseBytes: heap per held session-bound lease, the
// way a client holds many (issue 24: 1,000,000 of them): 64 sessions, each
// acquire sequenced (Seq, and Ack of the one before it, as the client
// sends them), one owner per session, names "w4/<i>". -benchtime 1x with
// FENCE_HELD=N to hold N (default 200,000); -memprofile shows where the
// bytes go.
func BenchmarkHeldSessionLeaseBytes(b *testing.B) {
	n := 200_000
	if v := os.Getenv("FENCE_HELD"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	const sessions = 64
	heap := func() uint64 {
		runtime.GC()
		var s runtime.MemStats
		runtime.ReadMemStats(&s)
		return s.HeapAlloc
	}
	for range b.N {
		m := NewWithConfig(DefaultConfig())
		ids := make([]uint64, sessions)
		for i := range ids {
			ids[i] = m.Apply(Command{Op: OpSessionOpen, TTL: time.Hour}).Session.ID
		}
		before := heap()
		for i := range n {
			s, seq := i%sessions, uint64(i/sessions+1)
			// The owner arrives decoded from each request: its own string.
			owner := strings.Clone("bench-host.example:12345")
			r := m.Apply(Command{Op: OpAcquire, Name: "w4/" + strconv.Itoa(i), Owner: owner, Session: ids[s], Seq: seq, Ack: seq})
			if r.Err != nil || r.Lease == nil {
				b.Fatalf("acquire %d: %v", i, r.Err)
			}
		}
		after := heap()
		if got := m.Holders(); got != n {
			b.Fatalf("%d held, want %d", got, n)
		}
		b.ReportMetric(float64(after-before)/float64(n), "bytes/lease")
		if p := os.Getenv("FENCE_HEAP_PROFILE"); p != "" {
			writeHeapProfile(b, p)
		}
		runtime.KeepAlive(m)
	}
}

// writeHeapProfile writes the live heap's profile to path.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
