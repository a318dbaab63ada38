package mysql

import (
	"context"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// MaxToken returns the largest token the default guard table has accepted.
// See Guard.MaxToken.
func MaxToken(ctx context.Context, db Querier) (fence.Token, error) {
	return defaultGuard.MaxToken(ctx, db)
}

// MaxTokenFound is MaxToken that tells an empty guard table apart. See
// Guard.MaxTokenFound.
func MaxTokenFound(ctx context.Context, db Querier) (max fence.Token, found bool, err error) {
	return defaultGuard.MaxTokenFound(ctx, db)
}

// MaxToken returns the largest last_token in g's guard table, 0 if it is
// empty (as guard/postgres and guard/sqlite do). Use MaxTokenFound where an
// empty table must not pass for a floor of 0. Tokens of the column pattern
// live in the user's tables and are not seen here.
func (g *Guard) MaxToken(ctx context.Context, db Querier) (fence.Token, error) {
	max, _, err := g.MaxTokenFound(ctx, db)
	return max, err
}

// MaxTokenFound returns the largest last_token in g's guard table (SELECT
// MAX(last_token)), with found = false when the table has no row at all —
// MAX of no rows is NULL, which is not confused with a token. `fence guard
// max-token --mysql` and `fence restore --floor-from mysql://…` use it: the
// floor a restore of the Fence server must stay above, so that no token
// issued after a restore is below one the database has already accepted; a
// floor read from the wrong table or database must fail, not count as 0. A
// missing table is an error (1146).
func (g *Guard) MaxTokenFound(ctx context.Context, db Querier) (max fence.Token, found bool, err error) {
	return g.e.MaxTokenFound(ctx, sqlguard.SQLQuerier{R: db})
}

// TableName is the guard table as configured ("fence_guard", "app.guard").
func (g *Guard) TableName() string { return g.e.TableName() }

// OpsTableName is the op table as configured.
func (g *Guard) OpsTableName() string { return g.e.OpsTableName() }
