package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/fenceworks/fence"
)

// Prune removes the default Guard's op records older than olderThan. See
// Guard.Prune.
func Prune(ctx context.Context, db Execer, olderThan time.Duration) (int64, error) {
	return defaultGuard.Prune(ctx, db, olderThan)
}

// Prune removes op records of every resource created more than olderThan
// ago (by the database's clock, UTC) and returns how many it removed. It
// deletes in statements of at most 1000 rows, oldest first, until one
// removes fewer: pass a *sql.DB so each runs in its own short autocommit
// transaction (a DELETE holds its row and gap locks until its transaction
// ends, which can hold up Do's inserts of new records). Run it from a
// periodic job. A retry of a removed op is applied again as a new op (its
// token is still checked). A negative olderThan is refused with
// *fence.InvalidError.
func (g *Guard) Prune(ctx context.Context, db Execer, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, fence.Invalid("older_than", "at least 0s", olderThan.String())
	}
	var total int64
	for {
		res, err := db.ExecContext(ctx, g.sql.pruneAll, olderThan.Microseconds())
		if err != nil {
			return total, fmt.Errorf("guard/mysql: prune: %w", g.noTable(err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("guard/mysql: prune: %w", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}
