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
