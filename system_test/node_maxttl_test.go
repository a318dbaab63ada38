//go:build e2e

package system_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// Fault 1 end to end: `fence serve --max-ttl 24h`, A takes a with a 2h TTL
// (token 1) and B takes b (token 2); restart the same data dir with
// --max-ttl 1h. The replay keeps both leases and the counter: a is still
// held with token 1, b with 2, the next grant is 3; only a new acquire
// above 1h is refused.
func TestNodeRestartWithLowerMaxTTL(t *testing.T) {
	srv := startServer(t, "--max-ttl", "24h")
	c := connectAPI(srv)
	ctx := context.Background()
	a, err := c.acquire(ctx, "a", "A", 2*time.Hour, 0)
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

	srv.RestartWith("--max-ttl", "1h")
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
