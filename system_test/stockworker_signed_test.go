//go:build e2e

package system_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keySetFile writes the key set the server at url publishes (GET
// /v1/keys) to a file, as an operator hands it to a guard.
func keySetFile(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/v1/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/keys: %d %s %v", resp.StatusCode, b, err)
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStockWorkerSigned (G9): stock-worker given its cluster's key set
// (--keys) verifies the lease's signed token in the PostgreSQL guard before
// it compares, and writes; given another cluster's key set (a staging
// server's) its token is refused FORGED_TOKEN, it exits 4, and the stock
// and guard rows are unchanged.
func TestStockWorkerSigned(t *testing.T) {
	dsn := postgresDSN(t)
	conn := pgConn(t, dsn)
	names := tableNames(t, conn, "stock", "fence_guard", "fence_ops")
	stockTable, guardTable, opsTable := names[0], names[1], names[2]
	prod, staging := startServer(t), startServer(t)
	prodKeys, stagingKeys := keySetFile(t, prod.URL()), keySetFile(t, staging.URL())
	bin := binary(t, "./examples/stock-worker")
	const sku = "sku-7"
	worker := func(name, keys string, args ...string) *proc {
		args = append([]string{"--server", prod.URL(), "--postgres", dsn, "--table", stockTable,
			"--guard-table", guardTable, "--ops-table", opsTable, "--sku", sku, "--keys", keys, "--ttl", "30s", "--wait", "60s"}, args...)
		return startProc(t, name, bin, nil, args...)
	}

	w := worker("worker with prod's keys", prodKeys, "--qty", "8")
	token := fieldUint(t, w.Line(), "token")
	if line := w.Line(); !strings.HasPrefix(line, "written ") || field(t, line, "qty") != "8" {
		t.Fatalf("worker with prod's keys: %q, want written qty=8", line)
	}
	if code := w.Wait(); code != 0 {
		t.Fatalf("worker with prod's keys exit code %d, want 0", code)
	}

	for _, args := range [][]string{{"--qty", "5"}, {"--add", "-1", "--op-id", "sale-1"}} {
		f := worker("worker with staging's keys", stagingKeys, args...)
		f.Line() // acquired
		if line := f.Line(); !strings.HasPrefix(line, "refused ") || field(t, line, "reason") != "FORGED_TOKEN" {
			t.Fatalf("worker with staging's keys %v: %q, want refused reason=FORGED_TOKEN", args, line)
		}
		if code := f.Wait(); code != 4 {
			t.Fatalf("worker with staging's keys exit code %d, want 4", code)
		}
	}
	if qty, last := stockRow(t, conn, stockTable, guardTable, sku); qty != 8 || last != int64(token) {
		t.Fatalf("after the refused writes: qty %d, guard last_token %d; want 8 and %d (unchanged)", qty, last, token)
	}
}
