package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
)

// An op record is stamped when it is saved (clock_timestamp()), not when
// its transaction began (now()): a Do whose transaction ran longer than
// Retention must not be pruned right after it commits, or a retry applies
// twice. The transaction below sleeps past Retention before saving; the
// retry, which prunes (PruneEvery 1), must replay — provided the retry's
// prune ran less than Retention after the save, which the database's own
// clock, read in the transaction before the save and again after the
// retry, shows. A retry later than that (a slow machine: the test used to
// fail there) may rightly find the record pruned; the round is then
// repeated with twice the retention, so the check is made at any speed.
func TestOpRecordStampedAtSave(t *testing.T) {
	db := testPool(t)
	ctx := context.Background()
	for retention := 2 * time.Second; retention <= 64*time.Second; retention *= 2 {
		tt := newTestTables(t, db)
		g, err := postgres.New(postgres.Options{Table: tt.guard, OpsTable: tt.ops, Retention: retention, PruneEvery: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		op := postgres.Op{Resource: "r", Token: 1, ID: "slow-op", Payload: []byte("p")}
		applied := 0
		var fnTime time.Time
		fn := func(tx pgx.Tx) ([]byte, error) {
			applied++
			// The transaction has waited longer than Retention before it saves.
			if _, err := tx.Exec(ctx, `SELECT pg_sleep($1::float8)`, (retention + 200*time.Millisecond).Seconds()); err != nil {
				return nil, err
			}
			if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&fnTime); err != nil {
				return nil, err
			}
			_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (resource, value, seq) VALUES ('r', 1, 1)`, tt.data))
			return []byte("done"), err
		}
		if _, _, err := g.Do(ctx, db, op, fn); err != nil {
			t.Fatal(err)
		}
		var createdAt time.Time
		if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT created_at FROM %s WHERE op_id = $1`, tt.ops), op.ID).Scan(&createdAt); err != nil {
			t.Fatal(err)
		}
		if createdAt.Before(fnTime) {
			t.Fatalf("op record created_at %v is before fn ran (%v): stamped at the transaction's start", createdAt, fnTime)
		}
		// The retry prunes first (PruneEvery 1), then looks the op up.
		res, replayed, err := g.Do(ctx, db, op, fn)
		var after time.Time
		if err := db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&after); err != nil {
			t.Fatal(err)
		}
		if d := after.Sub(fnTime); d >= retention {
			t.Logf("the retry ended %v after the save, not within the %v retention: again with %v", d, retention, 2*retention)
			continue
		}
		if err != nil || !replayed || string(res) != "done" || applied != 1 {
			t.Fatalf("retry right after a slow Do: %q replayed=%v err=%v, applied %d times; want the saved result, applied once", res, replayed, err, applied)
		}
		return
	}
	t.Fatal("no retry came within the retention of its save, up to 64s (a hang guard, not a timing assertion)")
}
