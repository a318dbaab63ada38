package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/sqlite"
)

func TestNewRefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		opts  sqlite.Options
		field string
	}{
		{sqlite.Options{Table: `guard"; DROP TABLE stock; --`}, "table"},
		{sqlite.Options{OpsTable: "a.b.c"}, "ops_table"},
		{sqlite.Options{Retention: -time.Second}, "retention"},
	} {
		g, err := sqlite.New(c.opts)
		var inv *fence.InvalidError
		if g != nil || !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("New(%+v) = %v, %v; want *fence.InvalidError for %s", c.opts, g, err, c.field)
		}
	}
}

type rows int64

func (r rows) LastInsertId() (int64, error) { return 0, nil }
func (r rows) RowsAffected() (int64, error) { return int64(r), nil }

func TestColumnRefusesBadNames(t *testing.T) {
	for _, c := range []struct {
		col   sqlite.Column
		field string
	}{
		{sqlite.Column{Table: "stock; --", Key: "sku", Token: "fence_token"}, "table"},
		{sqlite.Column{Table: "stock", Key: "a.b", Token: "fence_token"}, "key"},
		{sqlite.Column{Table: "stock", Key: "sku", Token: ""}, "token"},
	} {
		err := c.col.CheckRows(context.Background(), nil, rows(0), "k", 1)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%+v: err = %v, want *fence.InvalidError for %s", c.col, err, c.field)
		}
	}
}

// A table in an attached schema: the index goes in that schema too.
func TestQualifiedTables(t *testing.T) {
	ctx := context.Background()
	db, err := openTestDB(t).Conn(ctx) // an attachment belongs to one connection
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `ATTACH DATABASE ':memory:' AS aux`); err != nil {
		t.Fatal(err)
	}
	g, err := sqlite.New(sqlite.Options{Table: "aux.g", OpsTable: "aux.o"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Check(ctx, tx, "r", 4); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if max, err := g.MaxToken(ctx, db); err != nil || max != 4 {
		t.Fatalf("MaxToken = %d, %v; want 4", max, err)
	}
}
