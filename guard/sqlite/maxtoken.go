package sqlite

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

// MaxToken returns the largest last_token in g's guard table, 0 if it is
// empty. It is the floor a restore of the Fence server must stay above, so
// that no token issued after a restore is below one a store has already
// accepted: `fence guard max-token` prints it and `fence restore
// --floor-from` reads it (both refuse an empty table: a 0 there more likely
// means a wrong table than no tokens). Tokens of the column pattern live in
// the user's tables and are not seen here.
func (g *Guard) MaxToken(ctx context.Context, db Querier) (fence.Token, error) {
	max, _, err := g.e.MaxTokenFound(ctx, sqlguard.SQLQuerier{R: db})
	return max, err
}
