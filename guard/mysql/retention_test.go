package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence/guard/mysql"
)

// An op record is stamped when it is saved, not when its transaction began:
// a Do whose transaction ran longer than Retention must not be pruned right
// after it commits, or a retry applies twice. The transaction below sleeps
// past Retention before saving; the retry, which prunes (PruneEvery 1),
// must replay.
func TestOpRecordStampedAtSave(t *testing.T) {
	db := testDB(t)
	tt := newTestTables(t, db)
	const retention = time.Second
	g, err := mysql.New(mysql.Options{Table: tt.guard, OpsTable: tt.ops, Retention: retention, PruneEvery: 1})
	must(t, err)
	ctx := context.Background()
	must(t, g.Migrate(ctx, db))
	op := mysql.Op{Resource: "r", Token: 1, ID: "slow-op", Payload: []byte("p")}
	applied := 0
	fn := func(tx *sql.Tx) ([]byte, error) {
		applied++
		if _, err := tx.ExecContext(ctx, `DO SLEEP(?)`, (retention + 300*time.Millisecond).Seconds()); err != nil {
			return nil, err
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (resource, value, seq) VALUES ('r', 1, 1)`, tt.data))
		return []byte("done"), err
	}
	if _, _, err := g.Do(ctx, db, op, fn); err != nil {
		t.Fatal(err)
	}
	res, replayed, err := g.Do(ctx, db, op, fn)
	if err != nil || !replayed || string(res) != "done" || applied != 1 {
		t.Fatalf("retry right after a slow Do: %q replayed=%v err=%v, applied %d times; want the saved result, applied once", res, replayed, err, applied)
	}
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
