package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence/guard/mysql"
)

// An op record is stamped when it is saved (UTC_TIMESTAMP(6) at the
// insert), not when its transaction began:
// a Do whose transaction ran longer than Retention must not be pruned right
// after it commits, or a retry applies twice. The transaction below sleeps
// past Retention before saving; the retry, which prunes (PruneEvery 1),
// must replay — provided the retry's prune ran less than Retention after
// the save, which the database's own clock, read in the transaction before
// the save and again after the retry, shows. A
// retry later than that (a slow machine: the test used to fail there) may
// rightly find the record pruned; the round is then repeated with twice the
// retention, so the check is made at any speed.
func TestOpRecordStampedAtSave(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	const nowMicros = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))`
	for retention := time.Second; retention <= 64*time.Second; retention *= 2 {
		tt := newTestTables(t, db)
		g, err := mysql.New(mysql.Options{Table: tt.guard, OpsTable: tt.ops, Retention: retention, PruneEvery: 1})
		must(t, err)
		must(t, g.Migrate(ctx, db))
		op := mysql.Op{Resource: "r", Token: 1, ID: "slow-op", Payload: []byte("p")}
		applied := 0
		var beforeSave int64
		fn := func(tx *sql.Tx) ([]byte, error) {
			applied++
			if _, err := tx.ExecContext(ctx, `DO SLEEP(?)`, (retention + 300*time.Millisecond).Seconds()); err != nil {
				return nil, err
			}
			// The database's clock before the save: the record's stamp is
			// not earlier.
			if err := tx.QueryRowContext(ctx, nowMicros).Scan(&beforeSave); err != nil {
				return nil, err
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (resource, value, seq) VALUES ('r', 1, 1)`, tt.data))
			return []byte("done"), err
		}
		if _, _, err := g.Do(ctx, db, op, fn); err != nil {
			t.Fatal(err)
		}
		res, replayed, err := g.Do(ctx, db, op, fn)
		var after int64
		must(t, db.QueryRowContext(ctx, nowMicros).Scan(&after))
		if after-beforeSave >= retention.Microseconds() {
			t.Logf("the retry ended %v after the save, not within the %v retention: again with %v", time.Duration(after-beforeSave)*time.Microsecond, retention, 2*retention)
			continue
		}
		if err != nil || !replayed || string(res) != "done" || applied != 1 {
			t.Fatalf("retry right after a slow Do: %q replayed=%v err=%v, applied %d times; want the saved result, applied once", res, replayed, err, applied)
		}
		return
	}
	t.Fatal("no retry came within the retention of its save, up to 64s (a hang guard, not a timing assertion)")
}

// Prune deletes in batches until a batch comes back short: every old record
// goes, however many there are, and young ones stay.
func TestPruneRemovesEveryBatch(t *testing.T) {
	db := testDB(t)
	s := newStore(t, db, sql.LevelReadCommitted, -1)
	ctx := context.Background()
	const old, young = 2345, 3
	_, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (resource, op_id, payload_hash, result, token, created_at)
WITH d(x) AS (SELECT 0 UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
	UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9),
n(i) AS (SELECT a.x*1000 + b.x*100 + c.x*10 + e.x FROM d a, d b, d c, d e)
SELECT 'r', CONCAT('op-', i), UNHEX(SHA2('', 256)), NULL, 1, UTC_TIMESTAMP(6) - INTERVAL 2 DAY FROM n WHERE i < ?`, s.tt.ops), old)
	must(t, err)
	for i := range young {
		_, _, err := s.Do(ctx, opFor("r", 1, fmt.Sprintf("young-%d", i)), noopFn)
		must(t, err)
	}
	n, err := s.g.Prune(ctx, db, 24*time.Hour)
	if err != nil || n != old {
		t.Fatalf("Prune removed %d, %v; want %d", n, err, old)
	}
	if left := opCountOf(t, s); left != young {
		t.Fatalf("%d op records left, want the %d young ones", left, young)
	}
}

func opCountOf(t *testing.T, s *store) int {
	t.Helper()
	n, err := s.OpCount(context.Background())
	must(t, err)
	return n
}
