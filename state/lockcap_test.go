package state

import (
	"bytes"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// MaxLocks caps the locks that exist (held, delayed or with waiters): an
// acquire that would make one more is refused, naming config.max_locks,
// and changes nothing; the bound itself is allowed. Idle tombstones, and
// locks that already exist, do not count as new.
func TestLockCap(t *testing.T) {
	m := withConfig(t, func(c *Config) { c.MaxLocks = 2 })
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
	mustGrant(t, m, Command{Op: OpAcquire, Name: "b", Owner: "A", TTL: time.Second, LockDelay: time.Second}, 2) // the bound
	wantExhausted(t, m, acq(0, "c", "A", time.Minute), "config.max_locks", "at most 2")
	wantExhausted(t, m, waitAcq(0, "c", "A", time.Minute, time.Minute, "rc"), "config.max_locks", "at most 2")
	// An existing lock is not new: its waiters are capped by the waiter caps.
	if r := mustOK(t, m, waitAcq(0, "a", "B", time.Minute, time.Minute, "ra")); !r.Queued {
		t.Fatalf("waiter on an existing lock: %+v", r)
	}
	// b's lease ends at 1s and its lock-delay until 2s: still a lock.
	wantExhausted(t, m, acq(at(1.5), "c", "A", time.Minute), "config.max_locks", "at most 2")
	// Once the delay is over b is an idle tombstone: c fits, and b itself
	// may be taken again only while there is room.
	mustGrant(t, m, acq(at(2), "c", "A", time.Minute), 3)
	wantExhausted(t, m, acq(at(2), "b", "A", time.Minute), "config.max_locks", "at most 2")
	mustOK(t, m, rel(at(2), "c", 3))
	mustGrant(t, m, acq(at(2), "b", "A", time.Minute), 4)

	// A lock whose lease ended but that no command has settled yet is not
	// new to an acquire of that lock.
	n := withConfig(t, func(c *Config) { c.MaxLocks = 1 })
	mustGrant(t, n, acq(0, "a", "A", time.Second), 1)
	mustGrant(t, n, acq(at(5), "a", "B", time.Second), 2)

	// 0 is no cap.
	if DefaultConfig().MaxLocks != 1_000_000 {
		t.Fatalf("MaxLocks: default %d", DefaultConfig().MaxLocks)
	}
	u := NewWithConfig(uncapped())
	for i := range 5 {
		mustGrant(t, u, acq(0, string(rune('a'+i)), "A", time.Minute), fence.Token(i+1))
	}
}

// MaxLocks travels in the OpConfig codec (statepb.Config field 10) and in
// snapshots; what was written before it existed reads as 0 (no cap).
func TestLockCapEncoded(t *testing.T) {
	c := Command{Op: OpConfig, Config: Config{MaxLocks: 3}}
	b, err := c.MarshalBinary()
	if err != nil || !bytes.Equal(b, []byte{1, 0x08, 9, 0x7a, 2, 0x50, 6}) {
		t.Fatalf("%x %v", b, err)
	}
	var d Command
	if err := d.UnmarshalBinary(b); err != nil || d.Op != OpConfig || d.Config != c.Config {
		t.Fatalf("%+v %v", d, err)
	}
	// An OpConfig without field 10 decodes with MaxLocks 0 (no cap).
	if err := d.UnmarshalBinary([]byte{1, 0x08, 9, 0x7a, 4, 0x10, 6, 0x48, 2}); err != nil || d.Config != (Config{MaxOps: 3, MaxResourceBytes: 1}) {
		t.Fatalf("OpConfig without max_locks: %+v %v", d, err)
	}

	m := withConfig(t, func(c *Config) { c.MaxLocks = 7 })
	var s bytes.Buffer
	if err := m.Snapshot(&s); err != nil {
		t.Fatal(err)
	}
	if h, _ := snapMessages(t, s.Bytes()); h.Config.GetMaxLocks() != 7 {
		t.Fatalf("snapshot has no max_locks: %v", h)
	}
	n := New()
	if err := n.Restore(&s); err != nil || n.Config().MaxLocks != 7 {
		t.Fatalf("restored %+v %v", n.Config(), err)
	}
	old := emptySnapHeader(&Config{MaxTTL: time.Minute, MaxOps: 1, MaxRequests: 1, IDRetention: time.Second})
	old.Configured = true
	if err := n.Restore(bytes.NewReader(encodeSnap(old))); err != nil || n.Config().MaxLocks != 0 {
		t.Fatalf("snapshot without max_locks: %+v %v", n.Config(), err)
	}
}
