package mysql

import (
	"context"
	"time"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
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
	return g.e.Prune(ctx, sqlguard.SQLQuerier{X: db}, olderThan)
}
