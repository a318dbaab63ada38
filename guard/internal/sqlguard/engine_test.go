package sqlguard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/proof"
)

// fakeDB answers the engine's statements from a script: exec gives the rows
// affected per statement name (one entry per call, the last repeated), rows
// the values a QueryRow scans (nil: no row). It records what ran.
type fakeDB struct {
	exec    map[string][]int64
	execErr map[string]error
	rows    map[string][]any
	ran     []string
	began   []bool // readOnly of each Begin
}

func (f *fakeDB) Exec(_ context.Context, query string, _ ...any) (int64, error) {
	f.ran = append(f.ran, query)
	if err := f.execErr[query]; err != nil {
		return 0, err
	}
	ns := f.exec[query]
	if len(ns) == 0 {
		return 0, nil
	}
	n := ns[0]
	if len(ns) > 1 {
		f.exec[query] = ns[1:]
	}
	return n, nil
}

func (f *fakeDB) QueryRow(_ context.Context, query string, _ ...any) Row {
	f.ran = append(f.ran, query)
	return fakeRow(f.rows[query])
}

func (f *fakeDB) Commit(context.Context) error   { f.ran = append(f.ran, "COMMIT"); return nil }
func (f *fakeDB) Rollback(context.Context) error { return nil }

func (f *fakeDB) begin(readOnly bool) (Tx, error) { f.began = append(f.began, readOnly); return f, nil }

type fakeRow []any

func (r fakeRow) Scan(dest ...any) error {
	if r == nil {
		return sql.ErrNoRows
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *int64:
			*d = r[i].(int64)
		case **int64:
			if v, ok := r[i].(int64); ok {
				*d = &v
			} else {
				*d = nil
			}
		case *[]byte:
			*d = r[i].([]byte)
		default:
			return fmt.Errorf("fakeRow: cannot scan into %T", d)
		}
	}
	return nil
}

var errDup = errors.New("duplicate key")

func fakeDialect(readBack bool, batch int) Dialect {
	return Dialect{
		Pkg: "guard/fake",
		Statements: func(Tables) Statements {
			return Statements{Migrate: []string{"DDL"}, Check: "CHECK", Last: "LAST", LookupOp: "LOOKUP", SaveOp: "SAVE",
				PruneOne: "PRUNE1", PruneAll: "PRUNEALL", MaxToken: "MAX"}
		},
		Quote: Quote, Age: func(d time.Duration) any { return d.Seconds() }, Placeholder: func(int) string { return "?" },
		ReadBack: readBack, PruneBatch: batch,
		Duplicate: func(err error) bool { return errors.Is(err, errDup) },
	}
}

func newFakeEngine(t *testing.T, d Dialect) *Engine {
	t.Helper()
	e, err := NewEngine(d, "", "", Retention{PruneEvery: -1}, proof.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// With ReadBack (no RETURNING), 2 affected rows means the row was advanced;
// any other count is decided by the locking read: equal accepts, greater
// refuses with both tokens, smaller is an error, no row is an error.
func TestCheckReadBack(t *testing.T) {
	e := newFakeEngine(t, fakeDialect(true, 0))
	for _, tc := range []struct {
		name     string
		affected int64
		last     fakeRow
		want     error
		wantRead bool
	}{
		{name: "advanced", affected: 2, want: nil},
		{name: "inserted", affected: 1, last: fakeRow{int64(5)}, wantRead: true},
		{name: "found rows, equal", affected: 1, last: fakeRow{int64(5)}, wantRead: true},
		{name: "left as it was", affected: 0, last: fakeRow{int64(6)}, wantRead: true,
			want: &fence.StaleTokenError{Resource: "r", Token: 5, LastAccepted: 6}},
		{name: "row behind the token", affected: 1, last: fakeRow{int64(4)}, wantRead: true, want: errors.New("holds 4")},
		{name: "row missing", affected: 1, last: nil, wantRead: true, want: errors.New("missing after the upsert")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &fakeDB{exec: map[string][]int64{"CHECK": {tc.affected}}, rows: map[string][]any{}}
			if tc.last != nil {
				db.rows["LAST"] = tc.last
			}
			err := e.Check(context.Background(), db, "r", fence.SignedToken{Token: 5})
			var stale *fence.StaleTokenError
			switch want := tc.want.(type) {
			case nil:
				if err != nil {
					t.Errorf("err %v, want accepted", err)
				}
			case *fence.StaleTokenError:
				if !errors.As(err, &stale) || *stale != *want {
					t.Errorf("err %v, want %v", err, want)
				}
			default:
				if err == nil || errors.As(err, &stale) || !strings.Contains(err.Error(), want.Error()) {
					t.Errorf("err %v, want an error saying %q", err, want)
				}
			}
			if read := strings.Contains(strings.Join(db.ran, " "), "LAST"); read != tc.wantRead {
				t.Errorf("read the row: %v, want %v (ran %v)", read, tc.wantRead, db.ran)
			}
		})
	}
}

// With RETURNING, a returned row accepts and no row refuses with the facts
// read from the row.
func TestCheckReturning(t *testing.T) {
	e := newFakeEngine(t, fakeDialect(false, 0))
	db := &fakeDB{rows: map[string][]any{"CHECK": fakeRow{int64(5)}}}
	if err := e.Check(context.Background(), db, "r", fence.SignedToken{Token: 5}); err != nil {
		t.Errorf("returned row: %v", err)
	}
	db = &fakeDB{rows: map[string][]any{"LAST": fakeRow{int64(7)}}}
	var stale *fence.StaleTokenError
	if err := e.Check(context.Background(), db, "r", fence.SignedToken{Token: 5}); !errors.As(err, &stale) || *stale != (fence.StaleTokenError{Resource: "r", Token: 5, LastAccepted: 7}) {
		t.Errorf("no row returned: %v, want stale 5 < 7", err)
	}
}

// A save that hits a record saved by another transaction (a duplicate key)
// rolls back and replays that record from a new read-only transaction; if
// the record is gone by then, Do fails rather than apply twice.
func TestDoReplaysADuplicateSave(t *testing.T) {
	hash := PayloadHash([]byte("p"))
	for _, found := range []bool{true, false} {
		e := newFakeEngine(t, fakeDialect(false, 0))
		db := &fakeDB{rows: map[string][]any{"CHECK": fakeRow{int64(1)}}, execErr: map[string]error{"SAVE": errDup}}
		applied := 0
		op := Op{Resource: "r", Token: 1, ID: "op-1", Payload: []byte("p")}
		result, replayed, err := e.Do(context.Background(), db.begin, op, func(tx Tx) ([]byte, error) {
			applied++
			if found {
				db.rows["LOOKUP"] = fakeRow{hash, []byte("theirs")} // committed meanwhile
			}
			return []byte("mine"), nil
		})
		if applied != 1 || len(db.began) != 2 || db.began[0] || !db.began[1] {
			t.Fatalf("found=%v: applied %d, transactions %v; want one apply, then a read-only transaction", found, applied, db.began)
		}
		if strings.Contains(strings.Join(db.ran, " "), "COMMIT") {
			t.Errorf("found=%v: committed after the duplicate key (ran %v)", found, db.ran)
		}
		switch {
		case found && (err != nil || !replayed || string(result) != "theirs"):
			t.Errorf("record found: %q, %v, %v; want their result replayed", result, replayed, err)
		case !found && (err == nil || replayed || !strings.Contains(err.Error(), "vanished")):
			t.Errorf("record gone: %q, %v, %v; want an error", result, replayed, err)
		}
	}
}

// With a PruneBatch, Prune repeats its statement until one removes fewer
// rows than the batch, and returns the total.
func TestPruneBatches(t *testing.T) {
	e := newFakeEngine(t, fakeDialect(true, 10))
	db := &fakeDB{exec: map[string][]int64{"PRUNEALL": {10, 10, 3}}}
	if n, err := e.Prune(context.Background(), db, time.Hour); err != nil || n != 23 || len(db.ran) != 3 {
		t.Errorf("batched: %d, %v after %d statements; want 23 after 3", n, err, len(db.ran))
	}
	e = newFakeEngine(t, fakeDialect(false, 0))
	db = &fakeDB{exec: map[string][]int64{"PRUNEALL": {10}}}
	if n, err := e.Prune(context.Background(), db, time.Hour); err != nil || n != 10 || len(db.ran) != 1 {
		t.Errorf("unbatched: %d, %v after %d statements; want 10 after 1", n, err, len(db.ran))
	}
	var inv *fence.InvalidError
	if _, err := e.Prune(context.Background(), db, -time.Second); !errors.As(err, &inv) || inv.Field != "older_than" {
		t.Errorf("negative age: %v", err)
	}
}

// MaxTokenFound tells an empty table (NULL) from a floor, and refuses a
// negative last_token.
func TestMaxTokenFound(t *testing.T) {
	e := newFakeEngine(t, fakeDialect(false, 0))
	for _, tc := range []struct {
		row   any
		max   fence.Token
		found bool
		err   bool
	}{
		{row: nil, max: 0, found: false},
		{row: int64(42), max: 42, found: true},
		{row: int64(-1), err: true},
	} {
		db := &fakeDB{rows: map[string][]any{"MAX": fakeRow{tc.row}}}
		max, found, err := e.MaxTokenFound(context.Background(), db)
		if max != tc.max || found != tc.found || (err != nil) != tc.err {
			t.Errorf("MAX = %v: %d, %v, %v; want %d, %v, error %v", tc.row, max, found, err, tc.max, tc.found, tc.err)
		}
	}
}
