package state

import (
	"bytes"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// Once the client acknowledges a session-bound acquire that holds its lock,
// the machine keeps the lease but not the acquire's request (no live entry,
// no request in the snapshot); the lease is released by token and ends with
// its session as before. A queued acquire keeps its request (its grant is
// still to be told), and a request_id the client chose is kept.
func TestAnsweredSessionAcquireDropsItsRequest(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, Command{Op: OpSessionOpen, TTL: time.Minute})
	a := mustGrant(t, m, sAcq(0, s, 1, "a", "S", 0), 1)
	if m.live[SessionRequestID(s, 1)] == nil {
		t.Fatal("an unacknowledged acquire has no live request")
	}
	mustGrant(t, m, acq(0, "b", "B", time.Minute), 2)
	if r := mustOK(t, m, Command{Op: OpAcquire, Name: "b", Owner: "S", Wait: time.Minute, Session: s, Seq: 2, Ack: 2}); !r.Queued {
		t.Fatalf("want queued, got %s", describe(r))
	}
	mustGrant(t, m, Command{Op: OpAcquire, Name: "c", Owner: "S", Session: s, Seq: 3, Ack: 2, RequestID: "mine"}, 3)
	mustOK(t, m, Command{Op: OpSessionKeepAlive, Session: s, Ack: 4})

	if r := m.live[SessionRequestID(s, 1)]; r != nil || m.names.get("a").only().req != nil {
		t.Fatal("the acknowledged, held acquire's request is kept")
	}
	if m.live[SessionRequestID(s, 2)] == nil || m.live["mine"] == nil {
		t.Fatal("a queued acquire's or a chosen request_id's request was dropped")
	}
	snap := snapshotBytes(t, m)
	if bytes.Contains(snap, []byte(`"id":"AHMxLjE="`)) { // SessionRequestID(1, 1)
		t.Fatalf("the snapshot still has the dropped request: %s", snap)
	}
	restored := New()
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), snap) {
		t.Fatal("restore then snapshot differs")
	}
	if l := restored.Lock("a", 0); l.Lease == nil || l.Lease.Token != a.Token {
		t.Fatalf("restored: lock a %+v, want held by %d", l, a.Token)
	}
	if r := m.Apply(sAcq(0, s, 1, "a", "S", 0)); !isInvalid(r.Err, "seq") {
		t.Fatalf("retry of the acknowledged seq: %s, want invalid seq", describe(r))
	}
	for _, mm := range []*Machine{m, restored} {
		mustOK(t, mm, rel(sec, "a", a.Token))
		if l := mm.Lock("a", sec); !l.Free {
			t.Fatalf("lock a after release: %+v", l)
		}
		r := mustOK(t, mm, closeSess(2*sec, s))
		if l := mm.Lock("c", 2*sec); !l.Free || len(r.Events) != 1 || !isSessionExpired(r.Events[0].Err) {
			t.Fatalf("after close: lock c %+v, events %+v", l, r.Events)
		}
		if len(mm.live) != 0 {
			t.Fatalf("%d live requests after the session ended", len(mm.live))
		}
	}
}

func isInvalid(err error, field string) bool {
	e, ok := err.(*fence.InvalidError)
	return ok && e.Field == field
}

func isSessionExpired(err error) bool {
	_, ok := err.(*fence.SessionExpiredError)
	return ok
}
