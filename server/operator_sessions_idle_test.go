package server

import (
	"time"

	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// ListSessions reports a session's sinceKeepaliveMs and expiresInMs at the
// node's estimate of server time, not the state's: that moves only with
// commits, and an outside test saw a dead client's session on an idle
// store look freshly kept alive (the values frozen). On an idle node the
// time since the keepalive grows between calls and the time left shrinks.
func TestListSessionsTimesMoveOnAnIdleNode(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t, nil)
	admin := f.creds["admin"]
	out := f.must(fencev1connect.SessionServiceOpenProcedure, admin, `{"ttl":"120s"}`)
	id := num(out["session"].(map[string]any)["id"])
	times := func() (since, left uint64) {
		all, _ := sessionsOf(f, admin, 0)
		if len(all) != 1 || num(all[0]["sessionId"]) != id {
			t.Fatalf("ListSessions: %v; want session %d", all, id)
		}
		return num(all[0]["sinceKeepaliveMs"]), num(all[0]["expiresInMs"])
	}
	since0, left0 := times()
	// Nothing is committed from here on: only the clock moves.
	// A minute is a hang guard (the session lives 120 s), not a timing
	// assertion.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if since, left := times(); since > since0 && left < left0 {
			break
		}
		if time.Now().After(deadline) {
			since, left := times()
			t.Fatalf("on an idle node after a minute: sinceKeepaliveMs %d (first %d), expiresInMs %d (first %d); want them moved", since, since0, left, left0)
		}
	}
}
