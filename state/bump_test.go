package state

import (
	"testing"
	"time"
)

// OpBumpToken (the restore floor) raises the session counter too, never
// lowering it: the next session id is at least the floor.
func TestBumpTokenRaisesSessionIDs(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	for range 3 {
		mustOK(t, m, Command{Op: OpSessionOpen, Now: sec, TTL: time.Minute})
	}
	mustOK(t, m, Command{Op: OpBumpToken, Now: sec, Token: 100})
	if id := mustOK(t, m, Command{Op: OpSessionOpen, Now: sec, TTL: time.Minute}).Session.ID; id != 100 {
		t.Fatalf("session id after a bump to 100: %d, want 100", id)
	}
	mustOK(t, m, Command{Op: OpBumpToken, Now: sec, Token: 50})
	if id := mustOK(t, m, Command{Op: OpSessionOpen, Now: sec, TTL: time.Minute}).Session.ID; id != 101 {
		t.Fatalf("session id after a lower bump: %d, want 101 (never lowered)", id)
	}
	if got := mustGrant(t, m, acq(sec, "a", "o", time.Minute), 100); got == nil {
		t.Fatal("no grant")
	}
}
