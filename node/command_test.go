package node

import (
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// A session acquire with a seq and no request_id is given the session's
// id for that seq, so its retry finds the waiter; a request_id of its own
// is kept; without a session, or without a seq, none is made up.
func TestAcquireCommandSessionRequestID(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  fence.AcquireRequest
		want string
	}{
		{"session and seq", fence.AcquireRequest{Name: "l", Session: fence.SessionRef{ID: 5, Seq: 3}}, state.SessionRequestID(5, 3)},
		{"own request_id", fence.AcquireRequest{Name: "l", RequestID: "r", Session: fence.SessionRef{ID: 5, Seq: 3}}, "r"},
		{"session, no seq", fence.AcquireRequest{Name: "l", Session: fence.SessionRef{ID: 5}}, ""},
		{"seq, no session", fence.AcquireRequest{Name: "l", Session: fence.SessionRef{Seq: 3}}, ""},
		{"neither", fence.AcquireRequest{Name: "l"}, ""},
	} {
		cmd := acquireCommand(tc.req)
		if cmd.RequestID != tc.want || cmd.Session != tc.req.Session.ID || cmd.Seq != tc.req.Session.Seq {
			t.Errorf("%s: request_id %q session %d seq %d; want %q, %d, %d", tc.name, cmd.RequestID, cmd.Session, cmd.Seq,
				tc.want, tc.req.Session.ID, tc.req.Session.Seq)
		}
	}
}

// An acquire's mode, permits and set become the command's; a set of one
// lock is that lock in the single form; a set is proposed as listed (the
// machine sorts it), in a copy of the request's slice.
func TestAcquireCommandLockBoundaries(t *testing.T) {
	set := []fence.LockSpec{{Name: "sku/2"}, {Name: "catalog", Mode: fence.Shared}}
	for _, tc := range []struct {
		name string
		req  fence.AcquireRequest
		want state.Command
	}{
		{"shared", fence.AcquireRequest{Name: "c", Mode: fence.Shared}, state.Command{Name: "c", Mode: fence.Shared}},
		{"permits", fence.AcquireRequest{Name: "x", Permits: 4}, state.Command{Name: "x", Permits: 4}},
		{"a set", fence.AcquireRequest{Locks: set}, state.Command{Locks: set}},
		{"a set of one", fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "x", Permits: 3}}}, state.Command{Name: "x", Permits: 3}},
		{"a set of one shared", fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "c", Mode: fence.Shared}}}, state.Command{Name: "c", Mode: fence.Shared}},
	} {
		cmd := acquireCommand(tc.req)
		if cmd.Op != state.OpAcquire || cmd.Name != tc.want.Name || cmd.Mode != tc.want.Mode || cmd.Permits != tc.want.Permits ||
			len(cmd.Locks) != len(tc.want.Locks) {
			t.Fatalf("%s: command %+v, want name %q mode %v permits %d locks %v", tc.name, cmd, tc.want.Name, tc.want.Mode, tc.want.Permits, tc.want.Locks)
		}
		for i := range cmd.Locks {
			if cmd.Locks[i] != tc.want.Locks[i] {
				t.Fatalf("%s: locks %v, want %v", tc.name, cmd.Locks, tc.want.Locks)
			}
		}
		if len(cmd.Locks) > 0 && &cmd.Locks[0] == &tc.req.Locks[0] {
			t.Fatalf("%s: the command shares the request's slice", tc.name)
		}
	}
}
