//go:build e2e

package system_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestStockWorker runs examples/stock-worker as the story's two workers on a
// real PostgreSQL (G4, G5): A takes a 1s lease for the SKU and is frozen with
// SIGSTOP; B queues, is granted the lock once A's lease has expired, and
// writes 8; A resumes with SIGCONT and tries 5: PostgreSQL's guard refuses
// it, A exits 4 printing STALE_TOKEN, and the row says 8. Then a sale of 1
// is sent twice with one op_id (a retry after a lost reply), and once more by
// a later worker: it applies once — the row says 7, not 6 or 5 — and the
// repeats report "replayed"; the op_id reused for a sale of 2 is refused.
func TestStockWorker(t *testing.T) {
	const sku = "sku-42"
	conn, _, stockTable, guardTable, worker := stockWorkers(t, "--sku", sku)

	a := worker("worker A", "--owner", "worker-a", "--ttl", "1s", "--qty", "5", "--pause-before-write")
	tokenA := fieldUint(t, a.Line(), "token")
	a.Signal(syscall.SIGSTOP)

	b := worker("worker B", "--owner", "worker-b", "--ttl", "30s", "--wait", "60s", "--qty", "8")
	tokenB := fieldUint(t, b.Line(), "token")
	if tokenB <= tokenA {
		t.Fatalf("B's token %d is not greater than A's %d", tokenB, tokenA)
	}
	if line := b.Line(); !strings.HasPrefix(line, "written ") || field(t, line, "qty") != "8" {
		t.Fatalf("worker B: %q, want written qty=8", line)
	}
	if code := b.Wait(); code != 0 {
		t.Fatalf("worker B exit code %d, want 0", code)
	}

	a.Signal(syscall.SIGCONT)
	a.Send("")
	line := a.Line()
	if !strings.HasPrefix(line, "refused ") || field(t, line, "reason") != "STALE_TOKEN" ||
		fieldUint(t, line, "token") != tokenA || fieldUint(t, line, "last_accepted") != tokenB {
		t.Fatalf("worker A after SIGCONT: %q, want refused reason=STALE_TOKEN token=%d last_accepted=%d", line, tokenA, tokenB)
	}
	if code := a.Wait(); code != 4 {
		t.Fatalf("worker A exit code %d, want 4 (fencing refusal)", code)
	}
	if qty, last := stockRow(t, conn, stockTable, guardTable, sku); qty != 8 || last != int64(tokenB) {
		t.Fatalf("after A's late write: qty %d, guard last_token %d; want 8 and %d", qty, last, tokenB)
	}

	// A sale of 1, retried with the same op_id by the same worker and token.
	retry := worker("worker B retry", "--owner", "worker-b", "--ttl", "30s", "--wait", "60s",
		"--add", "-1", "--op-id", "sale-1", "--attempts", "2")
	retry.Line() // acquired
	for i, want := range []string{"applied", "replayed"} {
		line := retry.Line()
		if !strings.HasPrefix(line, want+" ") || field(t, line, "qty") != "7" {
			t.Fatalf("attempt %d of op_id sale-1: %q, want %s with qty=7", i+1, line, want)
		}
	}
	if code := retry.Wait(); code != 0 {
		t.Fatalf("retrying worker exit code %d, want 0", code)
	}
	// Once more from a new process with a newer token: still once.
	later := worker("later worker", "--owner", "worker-c", "--ttl", "30s", "--wait", "60s",
		"--add", "-1", "--op-id", "sale-1")
	later.Line() // acquired
	if line := later.Line(); !strings.HasPrefix(line, "replayed ") || field(t, line, "qty") != "7" {
		t.Fatalf("op_id sale-1 from a later worker: %q, want replayed qty=7", line)
	}
	if code := later.Wait(); code != 0 {
		t.Fatalf("later worker exit code %d, want 0", code)
	}
	// The same op_id for a different operation is refused.
	conflict := worker("conflicting worker", "--owner", "worker-c", "--ttl", "30s", "--wait", "60s",
		"--add", "-2", "--op-id", "sale-1")
	conflict.Line() // acquired
	if line := conflict.Line(); !strings.HasPrefix(line, "refused ") || field(t, line, "reason") != "OP_CONFLICT" {
		t.Fatalf("op_id sale-1 reused for a sale of 2: %q, want refused reason=OP_CONFLICT", line)
	}
	if code := conflict.Wait(); code != 4 {
		t.Fatalf("conflicting worker exit code %d, want 4", code)
	}
	if qty, _ := stockRow(t, conn, stockTable, guardTable, sku); qty != 7 {
		t.Fatalf("after the sale and its retries: qty %d, want 7 (applied once)", qty)
	}
}

// stockRow reads the SKU's quantity and its guard row's last token.
func stockRow(t testing.TB, conn *pgx.Conn, stockTable, guardTable, sku string) (qty, lastToken int64) {
	t.Helper()
	ctx := context.Background()
	if err := conn.QueryRow(ctx, "SELECT qty FROM "+pgx.Identifier{stockTable}.Sanitize()+" WHERE sku = $1", sku).Scan(&qty); err != nil {
		t.Fatalf("reading stock row: %v", err)
	}
	if err := conn.QueryRow(ctx, "SELECT last_token FROM "+pgx.Identifier{guardTable}.Sanitize()+" WHERE resource = $1", "stock/"+sku).Scan(&lastToken); err != nil {
		t.Fatalf("reading guard row: %v", err)
	}
	return qty, lastToken
}

// stockWorkers starts a server and returns a PostgreSQL connection, the
// server's URL, the stock and guard tables (fresh ones) and a starter of
// examples/stock-worker processes against them, each with args and then
// its own.
func stockWorkers(t *testing.T, args ...string) (conn *pgx.Conn, url, stockTable, guardTable string, worker func(name string, own ...string) *proc) {
	t.Helper()
	dsn := postgresDSN(t)
	conn = pgConn(t, dsn)
	names := tableNames(t, conn, "stock", "fence_guard", "fence_ops")
	stockTable, guardTable, opsTable := names[0], names[1], names[2]
	srv := startServer(t)
	bin := binary(t, "./examples/stock-worker")
	common := append([]string{"--server", srv.URL(), "--postgres", dsn, "--table", stockTable,
		"--guard-table", guardTable, "--ops-table", opsTable}, args...)
	return conn, srv.URL(), stockTable, guardTable, func(name string, own ...string) *proc {
		return startProc(t, name, bin, nil, append(append([]string(nil), common...), own...)...)
	}
}
