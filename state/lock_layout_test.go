package state

import (
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestLockAndGrantFitTheirSizeClasses: a held lock is a lockEntry and a
// grant, millions of them on a big server (issue 24), so their layout is
// part of what a lease costs: a lockEntry is 144 bytes and a grant 112 on
// a 64-bit platform, each a size class of its own with no padding wasted
// (docs/design.md, "A lock in memory"). Seen failing with lockEntry's
// permits back before lastToken (152) and with 16 bytes more in a grant
// (128: what a slice header for its parts cost).
func TestLockAndGrantFitTheirSizeClasses(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is stated for 64-bit platforms")
	}
	if got := unsafe.Sizeof(lockEntry{}); got != 144 {
		t.Errorf("lockEntry is %d bytes, want 144", got)
	}
	if got := unsafe.Sizeof(grant{}); got != 112 {
		t.Errorf("grant is %d bytes, want 112", got)
	}
}

// TestLeasesOfOneOwnerShareItsBytes: every command decodes its own owner
// string, but the leases of one owner on a session keep one copy of it
// (the session's last owner), also after a restore, and the lock's last
// owner is the holder's. Seen failing with grantTo not calling
// shareStrings (each lease its own copy), and with the restore not
// calling it.
func TestLeasesOfOneOwnerShareItsBytes(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	sess := m.Apply(Command{Op: OpSessionOpen, TTL: time.Hour}).Session.ID
	names := []string{"a", "b", "c"}
	for i, name := range names {
		owner := strings.Clone("worker-7") // as decoded: a string of its own
		r := m.Apply(Command{Op: OpAcquire, Name: name, Owner: owner, Session: sess, Seq: uint64(i + 1)})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	check := func(m *Machine, when string) {
		t.Helper()
		var first *byte
		for _, name := range names {
			l := m.names.get(name)
			if l == nil || len(l.holders) != 1 {
				t.Fatalf("%s: lock %q not held", when, name)
			}
			g := l.holders[0]
			if g.owner != "worker-7" {
				t.Fatalf("%s: owner %q", when, g.owner)
			}
			p := unsafe.StringData(g.owner)
			if first == nil {
				first = p
			}
			if p != first {
				t.Errorf("%s: the lease of %q keeps its own copy of its owner", when, name)
			}
			if unsafe.StringData(l.lastOwner) != p {
				t.Errorf("%s: lock %q's last owner is another copy of its holder's", when, name)
			}
		}
	}
	check(m, "applied")
	check(restored(t, m), "restored")
}
