//go:build e2e

package system_test

import (
	"context"
	"testing"
	"time"

	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// Fault 1 end to end: `fence serve --max-ttl 24h`, A takes a with a 2h TTL
// (token 1) and B takes b (token 2); restart the same data dir with
// --max-ttl 1h. The replay keeps both leases and the counter: a is still
// held with token 1, b with 2, the next grant is 3; only a new acquire
// above 1h is refused. A's acquire and an open, retried with their
// request_ids after the restart (their replies lost), get their first
// outcome, not a refusal by the lowered bounds (--max-lock-delay too):
// their clients learn what they hold.
func TestNodeRestartWithLowerMaxTTL(t *testing.T) {
	srv := startServer(t, "--max-ttl", "24h", "--max-lock-delay", "1h")
	c := connectAPI(srv)
	ctx := context.Background()
	aReq := &fencev1.AcquireRequest{Name: "a", Owner: "A", Ttl: durationpb.New(2 * time.Hour),
		LockDelay: durationpb.New(30 * time.Minute), RequestId: "a-1"}
	ar, err := c.Locks.Acquire(ctx, connect.NewRequest(aReq))
	if err != nil {
		t.Fatal(err)
	}
	a := ar.Msg.GetLease()
	sessions := fencev1connect.NewSessionServiceClient(&http.Client{Timeout: hangGuard}, srv.URL())
	oReq := &fencev1.OpenSessionRequest{Ttl: durationpb.New(2 * time.Hour), RequestId: "open-1"}
	opened, err := sessions.Open(ctx, connect.NewRequest(oReq))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.acquire(ctx, "b", "B", 10*time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.GetToken() != 1 || b.GetToken() != 2 {
		t.Fatalf("tokens %d, %d; want 1, 2", a.GetToken(), b.GetToken())
	}
	srv.Stop()

	srv.RestartWith("--max-ttl", "1h", "--max-lock-delay", "1m")
	again, err := c.Locks.Acquire(ctx, connect.NewRequest(aReq))
	if err != nil || !again.Msg.GetReplayed() || again.Msg.GetLease().GetToken() != 1 {
		t.Fatalf("A's acquire retried after the restart = %v, %v; want the replay of token 1", again, err)
	}
	reopened, err := sessions.Open(ctx, connect.NewRequest(oReq))
	if err != nil || !reopened.Msg.GetReplayed() || reopened.Msg.GetSession().GetId() != opened.Msg.GetSession().GetId() {
		t.Fatalf("the open retried after the restart = %v, %v; want the replay of session %d", reopened, err, opened.Msg.GetSession().GetId())
	}
	for _, want := range []struct {
		name  string
		token uint64
	}{{"a", 1}, {"b", 2}} {
		li, err := c.get(ctx, want.name)
		if err != nil {
			t.Fatal(err)
		}
		if li.GetLease().GetToken() != want.token {
			t.Fatalf("lock %s after the restart with --max-ttl 1h = %v, want held with token %d", want.name, li, want.token)
		}
	}
	next, err := c.acquire(ctx, "c", "C", 30*time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if next.GetToken() != 3 {
		t.Fatalf("next grant = %d, want 3 (no token reused)", next.GetToken())
	}
	_, err = c.acquire(ctx, "d", "D", 2*time.Hour, 0)
	if connect.CodeOf(err) != connect.CodeInvalidArgument || errorDetail(err).GetField() != "ttl" {
		t.Fatalf("2h acquire under --max-ttl 1h = %v (detail %v), want invalid_argument on ttl", err, errorDetail(err))
	}
}
