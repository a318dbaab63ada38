package state

import (
	"fmt"
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
