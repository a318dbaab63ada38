package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tx is what Check needs: the caller's open transaction. pgx.Tx (from
// pool.Begin, conn.Begin, pgx.BeginFunc) satisfies it; *pgxpool.Pool and
// *pgx.Conn do not, on purpose. Check run on a pool would commit the token
// advance by itself, in autocommit, separately from the caller's write: a
// newer owner could then write in between, and a failed write would leave
// the token advanced. Commit and Rollback are in the interface only to tell
// a transaction from a pool at compile time; Check, CheckOp and SaveOp never
// call them.
type Tx interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Querier runs one statement that returns at most one row. pgx.Tx, *pgx.Conn
// and *pgxpool.Pool satisfy it. The read-only helpers (MaxToken,
// Column.CheckRows) take it; Check takes a Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Execer runs one statement that returns no rows. pgx.Tx, *pgx.Conn and
// *pgxpool.Pool satisfy it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Beginner starts a transaction. *pgxpool.Pool and *pgx.Conn satisfy it.
// Do and Migrate start their own transactions with it.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}
