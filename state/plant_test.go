//go:build plantbug

package state

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/plant"
)

// Each planted fault of state/internal/plant, shown active (go test -tags
// plantbug ./state -run Plant). A test whose fault is not on in this
// process (FENCE_PLANTBUG) runs itself again in a child test binary with
// FENCE_PLANTBUG naming only its fault, so it needs no environment.

// plantChildEnv marks the child: a child whose fault is still off fails
// instead of starting another.
const plantChildEnv = "FENCE_PLANTBUG_TEST_CHILD"

// inChild runs t in a child process with bug on unless bug is on here. It
// reports whether it did (the caller then returns: the child ran the test).
func inChild(t *testing.T, bug plant.Bug) bool {
	t.Helper()
	if plant.On(bug) {
		return false
	}
	if os.Getenv(plantChildEnv) != "" {
		t.Fatalf("%s=%q in the child, but plant.On(%s) is false", plant.EnvVar, os.Getenv(plant.EnvVar), bug)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), plant.EnvVar+"="+string(bug), plantChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with %s=%s: %v\n%s", plant.EnvVar, bug, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child with %s=%s did not pass %s:\n%s", plant.EnvVar, bug, t.Name(), out)
	}
	return true
}

// skip-compare: a write or add with a token older than the resource's
// last accepted one is accepted, and the last token goes back.
func TestPlantSkipCompare(t *testing.T) {
	if inChild(t, plant.SkipCompare) {
		return
	}
	m := NewWithConfig(DefaultConfig())
	mustGrant(t, m, acq(0, "x", "A", time.Minute), 1)
	mustGrant(t, m, acq(0, "y", "B", time.Minute), 2)
	mustOK(t, m, write(sec, "r", 2, "9", ""))
	r := mustOK(t, m, write(2*sec, "r", 1, "8", "")) // stale: refused in a release build
	if st := r.Resource; st == nil || st.LastToken != 1 || st.Version != 2 || string(st.Value) != "8" {
		t.Fatalf("stale write: %s, want accepted with last token 1, version 2", describe(r))
	}
	r = mustOK(t, m, add(3*sec, "r", 1, -1, "")) // the newer token 2 was accepted before
	if r.AddValue != 7 || r.Resource.Version != 3 {
		t.Fatalf("stale add: %s, want accepted (7, version 3)", describe(r))
	}
	// Only the compare is skipped: a token never issued is still refused.
	errAs[*fence.UnknownTokenError](t, m.Apply(write(4*sec, "r", 99, "0", "")).Err)
}

// ids-forgotten: an op_id is forgotten by the next command at a later
// server time, so a write or add retried after a lost reply applies again.
func TestPlantIDsForgottenOpID(t *testing.T) {
	if inChild(t, plant.IDsForgotten) {
		return
	}
	m := NewWithConfig(DefaultConfig())
	mustGrant(t, m, acq(0, "x", "A", time.Minute), 1)
	mustOK(t, m, add(sec, "r", 1, 5, "op1"))
	// A retry in the same group (same server time) is still answered.
	if r := mustOK(t, m, add(sec, "r", 1, 5, "op1")); !r.Replayed || r.AddValue != 5 {
		t.Fatalf("retry at the same time: %s, want replayed 5", describe(r))
	}
	// The retry after a lost reply comes later: applied a second time.
	r := mustOK(t, m, add(2*sec, "r", 1, 5, "op1"))
	if r.Replayed || r.AddValue != 10 || r.Resource.Version != 2 {
		t.Fatalf("retry later: %s, want applied again (10, version 2)", describe(r))
	}
	mustOK(t, m, write(3*sec, "w", 1, "a", "op2"))
	if r := mustOK(t, m, write(4*sec, "w", 1, "a", "op2")); r.Replayed || r.Resource.Version != 2 {
		t.Fatalf("write retried later: %s, want applied again (version 2)", describe(r))
	}
}

// ids-forgotten on a session: the saved result of a seq is forgotten by
// the next command at a later server time, so a retried seq applies again.
func TestPlantIDsForgottenSeq(t *testing.T) {
	if inChild(t, plant.IDsForgotten) {
		return
	}
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, 10*time.Second))
	mustGrant(t, m, sAcq(0, s, 1, "x", "S", 0), 1)
	add := Command{Op: OpAdd, Now: sec, Name: "r", Token: 1, Delta: 5, Session: s, Seq: 2, Ack: 2}
	mustOK(t, m, add)
	if r := mustOK(t, m, add); !r.Replayed || r.AddValue != 5 {
		t.Fatalf("retry at the same time: %s, want replayed 5", describe(r))
	}
	add.Now = 2 * sec
	r := mustOK(t, m, add)
	if r.Replayed || r.AddValue != 10 || r.Resource.Version != 2 {
		t.Fatalf("seq retried later: %s, want applied again (10, version 2)", describe(r))
	}
	// The entry is replaced, not doubled: the next retry at that time is
	// answered from it.
	if r := mustOK(t, m, add); !r.Replayed || r.AddValue != 10 {
		t.Fatalf("second retry at the same time: %s, want replayed 10", describe(r))
	}
	restores(t, m)
}

// grant-held: when the last token issued is a multiple of 3, an acquire of
// a lock held by another live lease is granted; the displaced holder is
// not told, and learns only when it renews or releases.
func TestPlantGrantHeld(t *testing.T) {
	if inChild(t, plant.GrantHeld) {
		return
	}
	m := NewWithConfig(DefaultConfig())
	mustGrant(t, m, acq(0, "x", "A", time.Minute), 1)
	errAs[*fence.BusyError](t, m.Apply(acq(sec, "x", "B", time.Minute)).Err) // last token 1: busy
	mustGrant(t, m, acq(sec, "y", "Y", time.Minute), 2)
	if r := mustOK(t, m, waitAcq(sec, "x", "W", time.Minute, time.Minute, "w")); !r.Queued { // last token 2: queues
		t.Fatalf("waiter: %s, want queued", describe(r))
	}
	mustGrant(t, m, acq(sec, "z", "Z", time.Minute), 3)
	// Last token 3: granted although A holds x for 59 s more (and W waits).
	mustGrant(t, m, acq(2*sec, "x", "B", time.Minute), 4)
	errAs[*fence.StaleTokenError](t, m.Apply(renew(3*sec, "x", 1, 0)).Err)
	errAs[*fence.BusyError](t, m.Apply(acq(3*sec, "x", "C", time.Minute)).Err) // last token 4: busy again

	// A session's lease displaced the same way leaves the session without
	// it: closing the session does not free the new holder's lock.
	s := mustOpen(t, m, openSess(4*sec, 10*time.Second))
	mustGrant(t, m, sAcq(4*sec, s, 1, "v", "S", 0), 5)
	mustGrant(t, m, acq(4*sec, "u", "U", time.Minute), 6)
	mustGrant(t, m, acq(5*sec, "v", "B", time.Minute), 7)
	if r := mustOK(t, m, keepAlive(5*sec, s, 0)); r.Session.Leases != 0 {
		t.Fatalf("session after its lease was displaced: %s, want 0 leases", describe(r))
	}
	restores(t, m)
	mustOK(t, m, closeSess(5*sec, s))
	if l := m.Lock("v", 5*sec); l.Lease == nil || l.Lease.Token != 7 {
		t.Fatalf("lock v after the session closed: %+v, want held by token 7", l)
	}
	restores(t, m) // a node restarted from a snapshot takes what the fault left
}

// restores checks that m's snapshot restores and snapshots again to the
// same bytes: a planted fault leaves a state a restarted node can load.
func restores(t *testing.T, m *Machine) {
	t.Helper()
	b1 := snapshotBytes(t, m)
	m2 := New()
	if err := m2.Restore(bytes.NewReader(b1)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if b2 := snapshotBytes(t, m2); !bytes.Equal(b1, b2) {
		t.Fatalf("restore then snapshot differs:\n%s\n%s", b1, b2)
	}
}
