//go:build e2e

package system_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
)

// TestStoryPauseStaleWrite plays the paused-worker story with real processes (G4):
// worker A takes a 1s lease and is frozen with SIGSTOP while it holds it;
// worker B queues for the lock, is granted it once A's lease has expired in
// server time, and writes 8; A is resumed with SIGCONT and tries to write 5
// with its old token: the server refuses it with STALE_TOKEN, A exits with
// code 4, and the value stays B's. B's second write with the same token is
// accepted (equal tokens are allowed), as in the story (docs/story.md).
//
// No sleep and no timing assertion: B's grant is the server's word that A's
// lease has expired.
func TestStoryPauseStaleWrite(t *testing.T) {
	srv := startServer(t)
	worker := binary(t, "./system_test/internal/worker")
	const lock, resource = "story/sku-42", "stock/sku-42"

	a := startProc(t, "worker A", worker, nil, "--server", srv.URL(),
		"--lock", lock, "--owner", "worker-a", "--ttl", "1s", "--resource", resource, "--value", "5")
	tokenA := fieldUint(t, a.Line(), "token")
	a.Signal(syscall.SIGSTOP)

	// B waits in the lock's queue until A's lease expires.
	b := startProc(t, "worker B", worker, nil, "--server", srv.URL(),
		"--lock", lock, "--owner", "worker-b", "--ttl", "30s", "--wait", "60s", "--resource", resource, "--value", "8")
	tokenB := fieldUint(t, b.Line(), "token")
	if tokenB <= tokenA {
		t.Fatalf("B's token %d is not greater than A's %d", tokenB, tokenA)
	}
	b.Send("go")
	if line := b.Line(); !strings.HasPrefix(line, "written ") {
		t.Fatalf("worker B: %q, want its write accepted", line)
	}
	if code := b.Wait(); code != 0 {
		t.Fatalf("worker B exit code %d, want 0", code)
	}

	a.Signal(syscall.SIGCONT)
	a.Send("go")
	line := a.Line()
	if !strings.HasPrefix(line, "refused ") || field(t, line, "reason") != "STALE_TOKEN" {
		t.Fatalf("worker A after SIGCONT: %q, want refused reason=STALE_TOKEN", line)
	}
	if code := a.Wait(); code != 4 {
		t.Fatalf("worker A exit code %d, want 4 (fencing refusal)", code)
	}

	ctx := context.Background()
	c := connectAPI(srv)
	st, err := c.read(ctx, resource)
	if err != nil {
		t.Fatal(err)
	}
	if string(st.GetValue()) != "8" || st.GetLastToken() != tokenB {
		t.Fatalf("after A's late write: value %q last_token %d, want \"8\" and %d", st.GetValue(), st.GetLastToken(), tokenB)
	}

	// The story's last row: B writes again with the same token.
	st, err = c.write(ctx, resource, tokenB, "9")
	if err != nil {
		t.Fatalf("B's second write with the same token: %v", err)
	}
	if string(st.GetValue()) != "9" || st.GetLastToken() != tokenB || st.GetVersion() != 2 {
		t.Fatalf("final state: value %q last_token %d version %d, want \"9\", %d, 2", st.GetValue(), st.GetLastToken(), tokenB, st.GetVersion())
	}

	// The CLI reports the same refusal with exit code 4.
	stdout, stderr, code := runCLI(t, srv, "write", resource, "--token", itoa(tokenA), "--value", "5")
	if code != 4 || !strings.Contains(stdout+stderr, "STALE_TOKEN") && !strings.Contains(stdout+stderr, "older than accepted token") {
		t.Errorf("fence write with A's token: exit %d, output %q %q; want exit 4 and the stale-token refusal", code, stdout, stderr)
	}

	srv.Stop()
}
