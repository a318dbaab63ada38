//go:build e2e

package system_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// The story's pause at the scale of a session: one client holds 10,000
// leases on one session (2,000 under -short) and is SIGSTOPped past the
// session's TTL while another client waits on every one of its locks.
// When the session expires, every lock passes to the waiting client (which
// writes its own token to the lock's resource), and every write the paused
// client sends after SIGCONT, with the tokens it was granted, is refused at
// the store as stale: none is accepted, none is lost, and every resource
// keeps the waiter's value.
func TestSessionPausedHolderLosesEveryLock(t *testing.T) {
	n := 10_000
	if testing.Short() {
		n = 2_000
	}
	start := time.Now()
	// Without -race: the point is scale (40,000 commands).
	srv := startServerWith(t, plainBinary(t, "./cmd/fence"), filepath.Join(t.TempDir(), "data"))
	worker := plainBinary(t, "./system_test/internal/sessionworker")
	const prefix = "pause/"

	holder := startProc(t, "sessionworker hold", worker, nil,
		"hold", "--server", srv.URL(), "--prefix", prefix, "--n", strconv.Itoa(n), "--ttl", "5s")
	held := holder.Line()
	if field(t, held, "n") != strconv.Itoa(n) {
		t.Fatalf("holder: %q", held)
	}
	t.Logf("%v: held %d leases", time.Since(start), n)
	heldMax, _ := strconv.ParseUint(field(t, held, "max"), 10, 64)

	waiter := startProc(t, "sessionworker wait", worker, nil,
		"wait", "--server", srv.URL(), "--prefix", prefix, "--n", strconv.Itoa(n), "--wait", "5m")
	waitQueued(t, srv, prefix, n)
	t.Logf("%v: every lock has a waiter", time.Since(start))

	// Paused past the session's TTL: its keepalives stop with it.
	holder.Signal(syscall.SIGSTOP)
	got := waiter.Line()
	if field(t, got, "n") != strconv.Itoa(n) {
		t.Fatalf("waiter: %q", got)
	}
	if lo, _ := strconv.ParseUint(field(t, got, "min"), 10, 64); lo <= heldMax {
		t.Fatalf("waiter's tokens start at %d, not above the holder's %d", lo, heldMax)
	}

	t.Logf("%v: every lock passed to the waiter", time.Since(start))
	holder.Signal(syscall.SIGCONT)
	holder.Send("go")
	wrote := holder.Line()
	for !strings.HasPrefix(wrote, "wrote ") {
		// "keepalive refused" (the session has ended) and "late write"
		// lines may come first.
		wrote = holder.Line()
	}
	if field(t, wrote, "accepted") != "0" || field(t, wrote, "stale") != strconv.Itoa(n) || field(t, wrote, "other") != "0" {
		t.Fatalf("the paused holder's late writes: %q, want accepted=0 stale=%d other=0", wrote, n)
	}
	if code := holder.Wait(); code != 0 {
		t.Fatalf("holder exited %d", code)
	}

	// Every resource holds the waiter's value under the waiter's token.
	c := connectAPI(srv)
	ctx := context.Background()
	for _, i := range []int{0, 1, n / 2, n - 1} {
		st, err := c.read(ctx, prefix+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if string(st.GetValue()) != "waiter" || st.GetLastToken() <= heldMax || st.GetVersion() != 2 {
			t.Fatalf("resource %d = %v, want the waiter's write (version 2, token > %d)", i, st, heldMax)
		}
	}
}

// waitQueued waits until every lock prefix0..prefix(n-1) has a waiter.
func waitQueued(t *testing.T, srv *fenceServer, prefix string, n int) {
	t.Helper()
	c := connectAPI(srv)
	deadline := time.Now().Add(hangGuard)
	for {
		queued, page := 0, ""
		for {
			resp, err := c.Locks.List(context.Background(), connect.NewRequest(&fencev1.ListRequest{Prefix: prefix, PageSize: 1000, PageToken: page}))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range resp.Msg.GetLocks() {
				if l.GetWaiters() == 1 {
					queued++
				}
			}
			if page = resp.Msg.GetNextPageToken(); page == "" {
				break
			}
		}
		if queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d locks have a waiter", queued, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
