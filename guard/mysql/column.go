package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// Errors of Column.CheckRows besides *fence.StaleTokenError (the same values
// as guard/postgres and guard/sqlite).
var (
	// ErrNoRow: the UPDATE changed nothing because no row has the key.
	ErrNoRow = sqlguard.ErrNoRow
	// ErrNoMatch: the row exists and its token is not newer, yet the UPDATE
	// changed nothing: another condition in its WHERE clause failed, or —
	// MySQL counts changed rows, not matched ones — the UPDATE set every
	// column to the value it already had. Open the connection with
	// clientFoundRows=true to have matched rows counted.
	ErrNoMatch = sqlguard.ErrNoMatch
)

// Column describes the column pattern: the token lives in the user's own
// row instead of the guard table, and the write compares it itself:
//
//	ALTER TABLE stock ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0;
//	UPDATE stock SET qty = ?, fence_token = ? WHERE sku = ? AND fence_token <= ?;
//
// The UPDATE is atomic on its own (no separate transaction needed): InnoDB
// evaluates its WHERE on the latest version of the row under an exclusive
// lock, under every isolation level. When it changes no row, CheckRows says
// why.
type Column struct {
	Table string // the user's table, e.g. "stock"
	Key   string // its key column, e.g. "sku"
	Token string // its token column, e.g. "fence_token"
}

// CheckRows interprets the result of a column-pattern UPDATE for the
// row whose key is key, written with token:
//   - at least one row changed: nil;
//   - the row's token is newer: *fence.StaleTokenError (Resource is the key
//     printed with %v, LastAccepted the row's token);
//   - no row has that key: an error matching ErrNoRow;
//   - the row exists with a token not newer: an error matching ErrNoMatch
//     (see ErrNoMatch for MySQL's count of changed rows).
//
// Only in the 0-row case does it run a query (SELECT token FROM table WHERE
// key = ? LOCK IN SHARE MODE, a locking read, so that it sees the row's latest version
// under REPEATABLE READ too) with q — pass the same transaction as the
// UPDATE, if any. Table names that are not plain identifiers are refused
// with *fence.InvalidError.
func (c Column) CheckRows(ctx context.Context, q Querier, res sql.Result, key any, token fence.Token) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("guard/mysql: rows affected: %w", err)
	}
	return defaultGuard.e.CheckRows(ctx, sqlguard.SQLQuerier{R: q}, sqlguard.Column(c), n, key, token)
}
