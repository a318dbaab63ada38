package sqlite

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
// ago (by the local clock, in UTC) and returns how many it removed. It takes
// the write lock like any write; run it from a periodic job. A retry of a removed op is
// applied again as a new op (its token is still checked). A negative
// olderThan is refused with *fence.InvalidError.
func (g *Guard) Prune(ctx context.Context, db Execer, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, fence.Invalid("older_than", "at least 0s", olderThan.String())
	}
	res, err := db.ExecContext(ctx, g.sql.pruneAll, ageModifier(olderThan))
	if err != nil {
		return 0, fmt.Errorf("guard/sqlite: prune: %w", g.noTable(err))
	}
	return res.RowsAffected()
}
