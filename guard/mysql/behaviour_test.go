package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/guardtest"
	"github.com/fenceworks/fence/guard/mysql"
)

// With clientFoundRows=true the server counts a row left as it was as
// affected (1), like an insert: Check must not take that for an acceptance.
// A stale token is refused and an equal one accepted however the connection
// counts rows.
func TestCheckIgnoresClientFoundRows(t *testing.T) {
	for _, params := range []string{"", "clientFoundRows=true"} {
		t.Run("params="+params, func(t *testing.T) {
			db := testDBWith(t, params)
			s := newStore(t, db, sql.LevelRepeatableRead, -1)
			ctx := context.Background()
			must(t, s.Check(ctx, "r", 5))
			wantStale(t, s.Check(ctx, "r", 4), "r", 4, 5)
			if _, err := s.GuardedWrite(ctx, "r", 3, 30); err == nil {
				t.Fatal("a guarded write with a stale token was accepted")
			}
			// An equal token, twice in one transaction (the second leaves
			// the row as it is, even its updated_at if within the same µs).
			must(t, s.inTx(ctx, func(tx *sql.Tx) error {
				if err := s.g.Check(ctx, tx, "r", 5); err != nil {
					return err
				}
				return s.g.Check(ctx, tx, "r", 5)
			}))
			must(t, s.Check(ctx, "r", 6))
			if got, _, _ := s.LastToken(ctx, "r"); got != 6 {
				t.Fatalf("last token %d, want 6", got)
			}
			if _, seq, _, _ := s.Data(ctx, "r"); seq != 0 {
				t.Fatalf("the stale write wrote the data row (seq %d)", seq)
			}
		})
	}
}

// The column pattern's UPDATE of a row to the values it already has: MySQL
// reports 0 changed rows unless the connection counts found rows.
func TestColumnPatternIdenticalRewrite(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		params    string
		wantMatch bool // ErrNoMatch; else nil
	}{{"", true}, {"clientFoundRows=true", false}} {
		db := testDBWith(t, c.params)
		s := newStore(t, db, sql.LevelRepeatableRead, -1)
		must(t, s.StockInsert(ctx, "sku"))
		must(t, s.StockWrite(ctx, "sku", 2, 8))
		err := s.StockWrite(ctx, "sku", 2, 8) // the same values again
		if c.wantMatch && !errors.Is(err, mysql.ErrNoMatch) || !c.wantMatch && err != nil {
			t.Errorf("params %q: identical rewrite: %v, want ErrNoMatch=%v", c.params, err, c.wantMatch)
		}
		wantStale(t, s.StockWrite(ctx, "sku", 1, 8), "sku", 1, 2)
	}
}

// Resources are compared byte for byte, as Fence compares them: no
// collation folds case, trailing spaces or accents into one guard row.
func TestResourcesAreBytes(t *testing.T) {
	s := newStore(t, testDB(t), sql.LevelRepeatableRead, -1)
	ctx := context.Background()
	names := []string{"sku-1", "SKU-1", "sku-1 ", "skü-1", "sku-1\u0301", "склад/😀"}
	for i, r := range names {
		must(t, s.Check(ctx, r, fence.Token(10+i)))
	}
	for i, r := range names {
		got, found, err := s.LastToken(ctx, r)
		if err != nil || !found || got != fence.Token(10+i) {
			t.Errorf("resource %q: last token %d (found %v, %v), want %d: two names share a guard row", r, got, found, err, 10+i)
		}
	}
	// An op_id too: "Op" and "op" are different ops.
	for _, id := range []string{"op", "Op", "op "} {
		_, replayed, err := s.Do(ctx, opFor("sku-1", 20, id), noopFn)
		if err != nil || replayed {
			t.Errorf("op_id %q: replayed=%v err=%v, want a fresh apply", id, replayed, err)
		}
	}
}

func opFor(resource string, tok fence.Token, id string) guardOp {
	return guardOp{Resource: resource, Token: tok, ID: id}
}

func noopFn(func(int64) error) ([]byte, error) { return nil, nil }

// Migrate refuses a guard table that exists in an engine without
// transactions: every statement would succeed and nothing would be guarded.
func TestMigrateRefusesNonInnoDB(t *testing.T) {
	db := testDB(t)
	tt := newTestTables(t, db)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (resource VARBINARY(512) PRIMARY KEY, last_token BIGINT NOT NULL, updated_at DATETIME(6)) ENGINE=MyISAM", tt.guard)); err != nil {
		t.Fatal(err)
	}
	g, err := mysql.New(mysql.Options{Table: tt.guard, OpsTable: tt.ops})
	must(t, err)
	err = g.Migrate(ctx, db)
	if err == nil || !strings.Contains(err.Error(), "MyISAM") || !strings.Contains(err.Error(), tt.guard) {
		t.Fatalf("Migrate over a MyISAM guard table: %v, want an error naming the table and its engine", err)
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ENGINE=InnoDB", tt.guard)); err != nil {
		t.Fatal(err)
	}
	must(t, g.Migrate(ctx, db))
}

// A table in another database ("schema"): Migrate, Check and MaxToken.
func TestQualifiedTables(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	const schema = "fence_guard_test_qualified"
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+schema) })
	g, err := mysql.New(mysql.Options{Table: schema + ".g", OpsTable: schema + ".o"})
	must(t, err)
	must(t, g.Migrate(ctx, db))
	tx, err := db.BeginTx(ctx, nil)
	must(t, err)
	must(t, g.Check(ctx, tx, "r", 4))
	must(t, tx.Commit())
	if max, found, err := g.MaxTokenFound(ctx, db); err != nil || !found || max != 4 {
		t.Fatalf("MaxTokenFound = %d, %v, %v; want 4, true", max, found, err)
	}
}

// Check must be given the caller's transaction: on a *sql.DB or *sql.Conn
// the token advance would commit by itself, apart from the caller's write.
func TestCheckTakesATransaction(t *testing.T) {
	for name, param := range map[string]reflect.Type{
		"mysql.Check":      reflect.TypeOf(mysql.Check).In(1),
		"(*Guard).Check":   reflect.TypeOf((*mysql.Guard).Check).In(2),
		"mysql.CheckOp":    reflect.TypeOf(mysql.CheckOp).In(1),
		"(*Guard).SaveOp":  reflect.TypeOf((*mysql.Guard).SaveOp).In(2),
		"(*Guard).CheckOp": reflect.TypeOf((*mysql.Guard).CheckOp).In(2),
	} {
		for _, notTx := range []reflect.Type{reflect.TypeOf((*sql.DB)(nil)), reflect.TypeOf((*sql.Conn)(nil))} {
			if notTx.AssignableTo(param) {
				t.Errorf("%s accepts a %v: the token would commit separately from the write", name, notTx)
			}
		}
		if !reflect.TypeOf((*sql.Tx)(nil)).AssignableTo(param) {
			t.Errorf("%s does not accept a *sql.Tx", name)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		opts  mysql.Options
		field string
	}{
		{mysql.Options{Table: "guard`; DROP TABLE stock; --"}, "table"},
		{mysql.Options{OpsTable: "a.b.c"}, "ops_table"},
		{mysql.Options{Retention: -time.Second}, "retention"},
	} {
		g, err := mysql.New(c.opts)
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
		col   mysql.Column
		field string
	}{
		{mysql.Column{Table: "stock`; --", Key: "sku", Token: "fence_token"}, "table"},
		{mysql.Column{Table: "stock", Key: "a.b", Token: "fence_token"}, "key"},
		{mysql.Column{Table: "stock", Key: "sku", Token: ""}, "token"},
	} {
		err := c.col.CheckRows(context.Background(), nil, rows(0), "k", 1)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%+v: err = %v, want *fence.InvalidError for %s", c.col, err, c.field)
		}
	}
	if err := (mysql.Column{}).CheckRows(context.Background(), nil, rows(1), "k", 1); err != nil {
		t.Errorf("one row changed: %v, want nil", err)
	}
}

// Under REPEATABLE READ a transaction that read before CheckOp keeps its
// snapshot, so CheckOp may miss an op another transaction committed since.
// The op table's primary key then refuses the second record: SaveOp returns
// ErrOpSaved (retryable), the attempt rolls back, and the op stays applied
// once; the retry replays.
func TestCheckOpMissedBySnapshotIsNotAppliedTwice(t *testing.T) {
	db := testDB(t)
	s := newStore(t, db, sql.LevelRepeatableRead, -1)
	ctx := context.Background()
	op := mysql.Op{Resource: "r", Token: 1, ID: "op-1", Payload: []byte("p")}

	a, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	must(t, err)
	defer a.Rollback()
	var n int
	must(t, a.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s", s.tt.ops)).Scan(&n)) // A's snapshot: no op yet

	_, replayed, err := s.g.Do(ctx, db, op, func(tx *sql.Tx) ([]byte, error) {
		_, err := s.write(ctx, tx, "r", 1)
		return []byte("done"), err
	})
	if err != nil || replayed {
		t.Fatalf("first Do: replayed=%v err=%v", replayed, err)
	}

	_, replayed, err = s.g.CheckOp(ctx, a, op)
	if err != nil || replayed {
		t.Fatalf("CheckOp in the old snapshot: replayed=%v err=%v; want it to miss the op (this test's premise)", replayed, err)
	}
	if _, err := s.write(ctx, a, "r", 1); err != nil {
		t.Fatal(err)
	}
	err = s.g.SaveOp(ctx, a, op, []byte("again"))
	if !errors.Is(err, mysql.ErrOpSaved) || !mysql.IsRetryable(err) {
		t.Fatalf("SaveOp of an op saved since the snapshot: %v, want ErrOpSaved (retryable)", err)
	}
	must(t, a.Rollback())
	if seq := dataSeqOf(t, s, "r"); seq != 1 {
		t.Fatalf("data row written %d times, want 1", seq)
	}
	res, replayed, err := s.g.Do(ctx, db, op, func(*sql.Tx) ([]byte, error) { t.Error("applied again"); return nil, nil })
	if err != nil || !replayed || string(res) != "done" {
		t.Fatalf("retry: %q replayed=%v err=%v, want the saved result", res, replayed, err)
	}
}

func dataSeqOf(t *testing.T, s *store, resource string) int64 {
	t.Helper()
	_, seq, _, err := s.Data(context.Background(), resource)
	must(t, err)
	return seq
}

// MaxTokenFound tells an empty table from one whose largest token is read;
// MaxToken says 0 for both, like the other SQL guards.
func TestMaxTokenFound(t *testing.T) {
	s := newStore(t, testDB(t), sql.LevelRepeatableRead, -1)
	ctx := context.Background()
	if max, found, err := s.g.MaxTokenFound(ctx, s.db); err != nil || found || max != 0 {
		t.Fatalf("empty table: %d, found=%v, %v; want 0, false", max, found, err)
	}
	must(t, s.Check(ctx, "a", 7))
	if max, found, err := s.g.MaxTokenFound(ctx, s.db); err != nil || !found || max != 7 {
		t.Fatalf("after a check: %d, found=%v, %v; want 7, true", max, found, err)
	}
	missing, err := mysql.New(mysql.Options{Table: s.tt.guard + "_missing"})
	must(t, err)
	if _, _, err := missing.MaxTokenFound(ctx, s.db); err == nil {
		t.Fatal("a missing table gave no error")
	}
}

type guardOp = guardtest.Op

// An op record written without the guard row lock (by code other than Do)
// and committed between Do's lookup and its save: the op table's primary
// key refuses Do's record, Do rolls its attempt back — fn's write included —
// and returns the committed record's result as a replay.
func TestDoReplaysARecordSavedBehindItsBack(t *testing.T) {
	db := testDB(t)
	s := newStore(t, db, sql.LevelReadCommitted, -1)
	ctx := context.Background()
	op := mysql.Op{Resource: "r", Token: 1, ID: "op-1", Payload: []byte("p")}
	res, replayed, err := s.g.Do(ctx, db, op, func(tx *sql.Tx) ([]byte, error) {
		if _, err := s.write(ctx, tx, "r", 99); err != nil {
			return nil, err
		}
		// Another connection saves the same op and commits.
		_, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (resource, op_id, payload_hash, result, token, created_at)
VALUES ('r', 'op-1', UNHEX(SHA2('p', 256)), 'theirs', 1, UTC_TIMESTAMP(6))`, s.tt.ops))
		return []byte("mine"), err
	})
	if err != nil || !replayed || string(res) != "theirs" {
		t.Fatalf("Do = %q replayed=%v err=%v; want their saved result replayed", res, replayed, err)
	}
	if _, seq, found, _ := s.Data(ctx, "r"); found {
		t.Fatalf("fn's write committed (seq %d) although Do replayed another record", seq)
	}
}
