package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/fenceworks/fence/guard/mysql"
)

// TestWithoutMigrate: a guard used before Migrate created its tables says
// so — the table's name and "call Migrate" — instead of a bare "Table
// 'test.…' doesn't exist" (1146), and the MySQLError stays reachable.
func TestWithoutMigrate(t *testing.T) {
	db := testDB(t)
	tt := newTestTables(t, db) // creates neither the guard table nor the op table
	g, err := mysql.New(mysql.Options{Table: tt.guard, OpsTable: tt.ops})
	if err != nil {
		t.Fatal(err)
	}
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
		var me *driver.MySQLError
		if err == nil || !strings.Contains(err.Error(), "call Migrate") || !strings.Contains(err.Error(), "table "+table+" does not exist") ||
			!errors.As(err, &me) || me.Number != 1146 {
			t.Errorf("%s without Migrate: %v; want an error naming table %s, saying to call Migrate, wrapping the 1146 MySQLError", what, err, table)
		}
	}
	wantMissing("Check", inTx(func(tx *sql.Tx) error { return g.Check(ctx, tx, "sku-42", 2) }), tt.guard)
	_, err = g.MaxToken(ctx, db)
	wantMissing("MaxToken", err, tt.guard)
	_, err = g.Prune(ctx, db, time.Hour)
	wantMissing("Prune", err, tt.ops)

	// The guard table alone: Do names the op table.
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (resource VARBINARY(512) PRIMARY KEY, last_token BIGINT NOT NULL, updated_at DATETIME(6)) ENGINE=InnoDB", tt.guard)); err != nil {
		t.Fatal(err)
	}
	_, _, err = g.Do(ctx, db, mysql.Op{Resource: "sku-42", Token: 2, ID: "sale-1"}, func(*sql.Tx) ([]byte, error) { return nil, nil })
	wantMissing("Do", err, tt.ops)
}
