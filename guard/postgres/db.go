package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs one statement that returns at most one row. pgx.Tx, *pgx.Conn
// and *pgxpool.Pool satisfy it.
//
// For Check to be atomic with the caller's write it must be the caller's
// transaction (pgx.Tx): the guard row stays locked, and the token advance
// becomes visible, only when that transaction commits.
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
