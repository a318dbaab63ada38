package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestWithoutMigrate: a guard used before Migrate created its tables says
// so — the table's name and "call Migrate" — instead of a bare `relation
// ... does not exist (SQLSTATE 42P01)`, and the PgError stays reachable.
func TestWithoutMigrate(t *testing.T) {
	db := testPool(t)
	tt := newTestTables(t, db) // creates neither the guard table nor the op table
	g, err := postgres.New(postgres.Options{Table: tt.guard, OpsTable: tt.ops})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wantMissing := func(what string, err error, table string) {
		t.Helper()
		var pg *pgconn.PgError
		if err == nil || !strings.Contains(err.Error(), "call Migrate") || !strings.Contains(err.Error(), "table "+table+" does not exist") ||
			!errors.As(err, &pg) || pg.Code != "42P01" {
			t.Errorf("%s without Migrate: %v; want an error naming table %s, saying to call Migrate, wrapping the 42P01 PgError", what, err, table)
		}
	}
	wantMissing("Check", pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return g.Check(ctx, tx, "sku-42", 2) }), tt.guard)
	_, err = g.MaxToken(ctx, db)
	wantMissing("MaxToken", err, tt.guard)
	_, err = g.Prune(ctx, db, time.Hour)
	wantMissing("Prune", err, tt.ops)

	// The guard table alone: Do names the op table.
	if _, err := db.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (resource text PRIMARY KEY, last_token bigint NOT NULL, updated_at timestamptz)`, tt.guard)); err != nil {
		t.Fatal(err)
	}
	_, _, err = g.Do(ctx, db, postgres.Op{Resource: "sku-42", Token: 2, ID: "sale-1"}, func(pgx.Tx) ([]byte, error) { return nil, nil })
	wantMissing("Do", err, tt.ops)
}
