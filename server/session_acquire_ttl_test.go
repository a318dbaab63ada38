package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// An acquire bound to a session with a ttl is refused naming ttl, as Renew refuses it (the lease would live
// as long as the session, not the ttl asked for) — unary and on the
// stream; without ttl it is granted.
func TestSessionAcquireWithTTLRefused(t *testing.T) {
	_, url := startServer(t)
	open := object(t, sendJSON(t, url, fencev1connect.SessionServiceOpenProcedure, `{"ttl":"10s"}`))
	id := int64(number(t, open, "session", "id"))
	r := sendJSON(t, url, fencev1connect.LockServiceAcquireProcedure, fmt.Sprintf(`{"name":"a","owner":"s","ttl":"60s","session":{"id":%d}}`, id))
	m := object(t, r)
	if msg, _ := m["message"].(string); r.status != http.StatusBadRequest || at(m, "facts", "field") != "ttl" || !strings.Contains(msg, "leave ttl out") {
		t.Fatalf("unary acquire with ttl and session: %d %s; want 400 field ttl, 'leave ttl out'", r.status, r.body)
	}
	if g := sendJSON(t, url, "/fence.v1.LockService/Get", `{"name":"a"}`); strings.Contains(string(g.body), `"holder"`) {
		t.Fatalf("refused acquire took the lock: %s", g.body)
	}
	replies, end := streamJSONReplies(t, url,
		fmt.Sprintf(`{"session":%d,"call":1,"acquire":{"name":"a","owner":"s","ttl":"60s"}}`, id),
	)
	if len(replies) != 1 || at(replies[0], "error", "field") != "ttl" {
		t.Fatalf("stream acquire with ttl: %v (end %s); want a refusal naming ttl", replies, end)
	}
	r = sendJSON(t, url, fencev1connect.LockServiceAcquireProcedure, fmt.Sprintf(`{"name":"a","owner":"s","session":{"id":%d}}`, id))
	if m := object(t, r); r.status != http.StatusOK || at(m, "lease", "ttl") != "10s" {
		t.Fatalf("acquire on the session without ttl: %d %s; want 200, the session's 10s", r.status, r.body)
	}
}
