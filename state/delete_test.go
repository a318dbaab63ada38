package state

import (
	"bytes"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func del(now int64, res string, tok fence.Token, op string) Command {
	return Command{Op: OpDelete, Now: now, Name: res, Token: tok, OpID: op}
}

// OpDelete is fenced like a write, and the resource's last token outlives
// it: a stale writer is refused after the delete as before it.
func TestDeleteIsFenced(t *testing.T) {
	m := configured(t)
	for i := range 3 {
		mustGrant(t, m, acq(0, "x", "A", time.Second), fence.Token(i+1))
		mustOK(t, m, rel(0, "x", fence.Token(i+1)))
	}
	mustOK(t, m, write(0, "s", 2, "hello", "w1"))
	if m.resourceBytes != 5 {
		t.Fatalf("%d bytes", m.resourceBytes)
	}
	e := errAs[*fence.StaleTokenError](t, m.Apply(del(0, "s", 1, "")).Err)
	if e.LastAccepted != 2 {
		t.Fatalf("%+v", e)
	}
	errAs[*fence.UnknownTokenError](t, m.Apply(del(0, "s", 4, "")).Err)
	r := mustOK(t, m, del(0, "s", 3, "d1"))
	if st := r.Resource; st == nil || !st.Deleted || len(st.Value) != 0 || st.LastToken != 3 || st.Version != 2 {
		t.Fatalf("delete result %+v", r.Resource)
	}
	if m.resourceBytes != 0 {
		t.Fatalf("%d bytes after the delete", m.resourceBytes)
	}
	if rs := m.Resource("s"); !rs.Deleted || rs.LastToken != 3 || rs.Value != nil {
		t.Fatalf("deleted resource reads %+v", rs)
	}
	// The stale writer (token 2) is refused after the delete.
	e = errAs[*fence.StaleTokenError](t, m.Apply(write(0, "s", 2, "late", "")).Err)
	if e.LastAccepted != 3 {
		t.Fatalf("%+v", e)
	}
	// A retried delete gets its saved result, even after a newer write.
	mustOK(t, m, write(0, "s", 3, "again", ""))
	r = mustOK(t, m, del(0, "s", 3, "d1"))
	if !r.Replayed || !r.Resource.Deleted || r.Resource.Version != 2 {
		t.Fatalf("replayed delete %+v", r.Resource)
	}
	if rs := m.Resource("s"); rs.Deleted || string(rs.Value) != "again" || rs.Version != 3 {
		t.Fatalf("rewritten resource %+v", rs)
	}
	wantConflict("op_id", "d1")(t, m, m.Apply(write(0, "s", 3, "x", "d1")))
	// A resource never written can be deleted: its tombstone fences it.
	mustOK(t, m, del(0, "never", 3, ""))
	errAs[*fence.StaleTokenError](t, m.Apply(write(0, "never", 2, "v", "")).Err)
	// Snapshots keep tombstones.
	n := New()
	if err := n.Restore(bytes.NewReader(snapshotBytes(t, m))); err != nil {
		t.Fatal(err)
	}
	if rs := n.Resource("never"); !rs.Deleted || rs.LastToken != 3 || n.resourceBytes != 5 {
		t.Fatalf("restored tombstone %+v, %d bytes", rs, n.resourceBytes)
	}
}

func TestDeleteBounds(t *testing.T) {
	m := configured(t)
	e := errAs[*fence.InvalidError](t, m.Apply(Command{Op: OpDelete, Name: "s"}).Err)
	if e.Field != "token" {
		t.Fatalf("%+v", e)
	}
	e = errAs[*fence.InvalidError](t, m.Apply(Command{Op: OpDelete, Token: 1}).Err)
	if e.Field != "resource" {
		t.Fatalf("%+v", e)
	}
}
