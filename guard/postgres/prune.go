package postgres

import (
	"context"
	"time"
)

// Prune removes the default Guard's op records older than olderThan. See
// Guard.Prune.
func Prune(ctx context.Context, db Execer, olderThan time.Duration) (int64, error) {
	return defaultGuard.Prune(ctx, db, olderThan)
}

// Prune removes op records of every resource created more than olderThan
// ago (by the database's clock) and returns how many it removed. Records
// locked by running transactions are skipped, so Prune never waits and never
// deadlocks with Do; run it from a periodic job. A retry of a removed op is
// applied again as a new op (its token is still checked). A negative
// olderThan is refused with *fence.InvalidError.
func (g *Guard) Prune(ctx context.Context, db Execer, olderThan time.Duration) (int64, error) {
	return g.e.Prune(ctx, querier{x: db}, olderThan)
}
