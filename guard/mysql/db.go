package mysql

import (
	"context"
	"database/sql"
)

// Querier runs one statement that returns at most one row. *sql.Tx, *sql.DB
// and *sql.Conn satisfy it. The read-only helpers (MaxToken,
// Column.CheckRows) take it; Check takes a *sql.Tx, so that the token
// advance becomes visible only when the caller's transaction commits,
// together with the write.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Execer runs one statement that returns no rows. *sql.Tx, *sql.DB and
// *sql.Conn satisfy it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Beginner starts a transaction. *sql.DB and *sql.Conn satisfy it. Do and
// Migrate start their own transactions with it.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}
