//go:build e2e

package phpstock

import (
	"strconv"
	"strings"
	"testing"

	"github.com/fenceworks/fence/testkit/harness"
)

// TestPHPWorkerSKUIsExact: the worker's SKU is a lock name's part, and the
// stock row is keyed by its exact bytes, as the lock and the guard row
// are. SKUs that differ only in case or by a trailing space, and one
// longer than 64 bytes, are separate rows (a VARCHAR(64) with MariaDB's
// default collation made the first three one row — two lock holders
// writing one row — and truncated or refused the long one). A SKU that
// cannot make a lock name (empty, not UTF-8, the lock name over 512
// bytes) is refused with the reason before anything is touched (exit 2).
func TestPHPWorkerSKUIsExact(t *testing.T) {
	php := requirePHP(t)
	db := testDB(t)
	suffix := randomSuffix(t)
	stockTable, guardTable, opsTable := "php_stock_"+suffix, "php_guard_"+suffix, "php_ops_"+suffix
	t.Cleanup(func() {
		for _, tbl := range []string{stockTable, guardTable, opsTable} {
			db.Exec("DROP TABLE IF EXISTS `" + tbl + "`")
		}
	})
	srv := harness.StartT(t, harness.Config{})
	worker := func(name, sku string, args ...string) *proc {
		args = append([]string{"worker.php", "--server", srv.URL(), "--dsn", phpDSN(t),
			"--stock-table", stockTable, "--guard-table", guardTable, "--ops-table", opsTable, "--sku", sku}, args...)
		return startProc(t, name, php, args...)
	}

	long := "sku-" + strings.Repeat("9", 502) // 506 bytes: the lock name "stock/<sku>" is 512
	skus := map[string]string{}
	write := func(sku, qty string) {
		t.Helper()
		w := worker("worker "+sku[:min(len(sku), 12)], sku, "--owner", "w", "--qty", qty)
		w.expect("acquired")
		w.expect("written")
		w.expect("released")
		w.wait(0)
		skus[sku] = qty
	}
	check := func() {
		t.Helper()
		for sku, want := range skus {
			var qty string
			if err := db.QueryRow("SELECT qty FROM `"+stockTable+"` WHERE sku = ?", sku).Scan(&qty); err != nil || qty != want {
				t.Errorf("stock of %q: %q (%v), want %s (its own row)", sku, qty, err, want)
			}
		}
		var rows int
		if err := db.QueryRow("SELECT COUNT(*) FROM `" + stockTable + "`").Scan(&rows); err != nil || rows != len(skus) {
			t.Errorf("%d stock rows (%v), want %d: one per SKU", rows, err, len(skus))
		}
	}
	for i, sku := range []string{"sku-7", "SKU-7", "sku-7 ", "sku-ß", "sku-ss"} {
		write(sku, strconv.Itoa(i+1))
	}
	check()
	write(long, "9")
	check()

	for _, c := range []struct{ sku, why string }{
		{"", "--sku: want a SKU (not empty)"},
		{"sku-\xff", "--sku: want valid UTF-8"},
		{long + "9", "--sku: want at most 506 bytes"},
	} {
		w := worker("bad sku", c.sku, "--owner", "w", "--qty", "1")
		w.wait(2)
		w.mu.Lock()
		stderr := w.stderr.String()
		w.mu.Unlock()
		if !strings.Contains(stderr, c.why) {
			t.Errorf("--sku %q: stderr %q, want %q", c.sku, stderr, c.why)
		}
	}

	// A stock table an older worker made (sku VARCHAR(64)) is refused,
	// saying how to change it, before any lock is taken.
	oldTable := "php_oldstock_" + suffix
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS `" + oldTable + "`") })
	if _, err := db.Exec("CREATE TABLE `" + oldTable + "` (sku VARCHAR(64) NOT NULL PRIMARY KEY, qty INT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	w := startProc(t, "worker on an old table", php, "worker.php", "--server", srv.URL(), "--dsn", phpDSN(t),
		"--stock-table", oldTable, "--guard-table", guardTable, "--ops-table", opsTable, "--sku", "sku-7", "--owner", "w", "--qty", "1")
	w.wait(1)
	w.mu.Lock()
	stderr := w.stderr.String()
	w.mu.Unlock()
	if !strings.Contains(stderr, "column sku is varchar, want varbinary") || !strings.Contains(stderr, "ALTER TABLE `"+oldTable+"` MODIFY sku VARBINARY(506) NOT NULL") {
		t.Errorf("an old stock table: stderr %q, want the refusal and the ALTER TABLE", stderr)
	}
}
