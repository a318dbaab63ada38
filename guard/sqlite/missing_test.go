package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	moderncsqlite "modernc.org/sqlite"

	"github.com/fenceworks/fence/guard/sqlite"
)

// TestWithoutMigrate: a guard used before Migrate created its tables says
// so — the table's name and "call Migrate" — instead of a bare "no such
// table", and the driver's *sqlite.Error stays reachable.
func TestWithoutMigrate(t *testing.T) {
	db := openTestDB(t) // a fresh file: neither the guard table nor the op table
	ctx := context.Background()
	inTx := func(f func(tx *sql.Tx) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		return f(tx)
	}
	wantMissing := func(what string, err error, table string) {
		t.Helper()
		var se *moderncsqlite.Error
		if err == nil || !strings.Contains(err.Error(), "call Migrate") || !strings.Contains(err.Error(), "table "+table+" does not exist") ||
			!errors.As(err, &se) {
			t.Errorf("%s without Migrate: %v; want an error naming table %s, saying to call Migrate, wrapping the *sqlite.Error", what, err, table)
		}
	}
	// The package-level functions: the default tables.
	wantMissing("Check", inTx(func(tx *sql.Tx) error { return sqlite.Check(ctx, tx, "sku-42", 2) }), "fence_guard")

	g, err := sqlite.New(sqlite.Options{Table: "stock_guard", OpsTable: "stock_ops"})
	if err != nil {
		t.Fatal(err)
	}
	wantMissing("Check", inTx(func(tx *sql.Tx) error { return g.Check(ctx, tx, "sku-42", 2) }), "stock_guard")
	_, err = g.MaxToken(ctx, db)
	wantMissing("MaxToken", err, "stock_guard")
	_, err = g.Prune(ctx, db, time.Hour)
	wantMissing("Prune", err, "stock_ops")

	// The guard table alone: Do names the op table.
	if _, err := db.ExecContext(ctx, `CREATE TABLE stock_guard (resource TEXT PRIMARY KEY, last_token INTEGER NOT NULL, updated_at TEXT)`); err != nil {
		t.Fatal(err)
	}
	_, _, err = g.Do(ctx, db, sqlite.Op{Resource: "sku-42", Token: 2, ID: "sale-1"}, func(*sql.Tx) ([]byte, error) { return nil, nil })
	wantMissing("Do", err, "stock_ops")
}
