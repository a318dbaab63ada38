package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestNewRefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		opts  postgres.Options
		field string
	}{
		{postgres.Options{Table: `guard"; DROP TABLE stock; --`}, "table"},
		{postgres.Options{OpsTable: "a.b.c"}, "ops_table"},
		{postgres.Options{Retention: -time.Second}, "retention"},
	} {
		g, err := postgres.New(c.opts)
		var inv *fence.InvalidError
		if g != nil || !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("New(%+v) = %v, %v; want *fence.InvalidError for %s", c.opts, g, err, c.field)
		}
	}
	if g, err := postgres.New(postgres.Options{Table: "app.guard", OpsTable: "app.ops"}); err != nil || g == nil {
		t.Fatalf("schema-qualified names refused: %v", err)
	}
}

func TestColumnRefusesBadNames(t *testing.T) {
	// CheckRows only builds SQL when no row changed; no database is reached
	// because the names are refused first.
	for _, c := range []struct {
		col   postgres.Column
		field string
	}{
		{postgres.Column{Table: "stock; --", Key: "sku", Token: "fence_token"}, "table"},
		{postgres.Column{Table: "stock", Key: "a.b", Token: "fence_token"}, "key"},
		{postgres.Column{Table: "stock", Key: "sku", Token: ""}, "token"},
	} {
		err := c.col.CheckRows(context.Background(), nil, pgconn.NewCommandTag("UPDATE 0"), "k", 1)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%+v: err = %v, want *fence.InvalidError for %s", c.col, err, c.field)
		}
	}
	if err := (postgres.Column{}).CheckRows(context.Background(), nil, pgconn.NewCommandTag("UPDATE 1"), "k", 1); err != nil {
		t.Errorf("one row changed: %v, want nil", err)
	}
}

// TestNewRefusesKeySetAndKeySource: a guard reads its keys from one place.
func TestNewRefusesKeySetAndKeySource(t *testing.T) {
	ks := &fence.KeySet{ClusterID: "c"}
	g, err := postgres.New(postgres.Options{KeySet: ks, KeySource: func() *fence.KeySet { return ks }})
	var inv *fence.InvalidError
	if g != nil || !errors.As(err, &inv) || inv.Field != "key_source" {
		t.Fatalf("New with KeySet and KeySource = %v, %v; want *fence.InvalidError for key_source", g, err)
	}
}
