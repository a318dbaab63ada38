package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/guardtest"
	"github.com/fenceworks/fence/guard/mysql"
)

// MariaDB 11.8 turns innodb_snapshot_isolation on by default: under
// REPEATABLE READ, a locking read or write of a row changed after the
// transaction's snapshot fails with error 1020 instead of reading the
// latest version. The guard's Check then fails with an error IsRetryable
// reports, never with an acceptance of a stale token, and the retry (a new
// transaction) decides: refused if stale, accepted if newer.
func TestSnapshotIsolationOn(t *testing.T) {
	db := testDBWith(t, "innodb_snapshot_isolation=1")
	var on int
	if err := db.QueryRow(`SELECT @@session.innodb_snapshot_isolation`).Scan(&on); err != nil || on != 1 {
		t.Skipf("this server has no innodb_snapshot_isolation (MySQL, or MariaDB before 10.6.18/10.11.8): %v", err)
	}
	ctx := context.Background()
	for _, tok := range []fence.Token{1, 3} {
		s := newStore(t, db, sql.LevelRepeatableRead, -1)
		must(t, s.Check(ctx, "r", 1))
		a, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
		must(t, err)
		var seen int64
		must(t, a.QueryRowContext(ctx, fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = 'r'`, s.tt.guard)).Scan(&seen))
		must(t, s.Check(ctx, "r", 2)) // B overtakes after A's snapshot
		err = s.g.Check(ctx, a, "r", tok)
		a.Rollback()
		if err == nil || !mysql.IsRetryable(err) {
			t.Fatalf("token %d checked in a snapshot older than token 2's commit: %v, want a retryable error (1020)", tok, err)
		}
		t.Logf("token %d in the old snapshot: %v", tok, err)
		// The retry, in a new transaction, decides.
		err = s.Check(ctx, "r", tok)
		if tok < 2 {
			wantStale(t, err, "r", tok, 2)
		} else {
			must(t, err)
		}
	}
}

// The shared suite with innodb_snapshot_isolation on (MariaDB 11.8's
// default): Check as a transaction's first statement reads no snapshot, so
// the 32-writer history runs without a 1020.
func TestConformanceSnapshotIsolation(t *testing.T) {
	db := testDBWith(t, "innodb_snapshot_isolation=1")
	var on int
	if err := db.QueryRow(`SELECT @@session.innodb_snapshot_isolation`).Scan(&on); err != nil || on != 1 {
		t.Skipf("this server has no innodb_snapshot_isolation: %v", err)
	}
	guardtest.Run(t, func(t *testing.T, o guardtest.Options) guardtest.Store {
		return newStoreOpts(t, db, sql.LevelRepeatableRead, o)
	})
}
