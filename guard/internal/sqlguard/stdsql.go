package sqlguard

import (
	"context"
	"database/sql"
)

// SQLQuerier adapts database/sql's methods (of *sql.Tx, *sql.DB, *sql.Conn)
// to Querier. R serves QueryRow, X serves Exec; either may be nil when the
// caller passed only one of them (the other is then never called).
type SQLQuerier struct {
	R interface {
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
	X interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
}

// QueryRow runs query with R.
func (q SQLQuerier) QueryRow(ctx context.Context, query string, args ...any) Row {
	return q.R.QueryRowContext(ctx, query, args...)
}

// Exec runs query with X and returns the rows it affected.
func (q SQLQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.X.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// SQLTx adapts a *sql.Tx to Tx.
type SQLTx struct {
	SQLQuerier
	Tx *sql.Tx
}

// NewSQLTx wraps tx.
func NewSQLTx(tx *sql.Tx) SQLTx { return SQLTx{SQLQuerier{tx, tx}, tx} }

// Commit commits the transaction.
func (t SQLTx) Commit(context.Context) error { return t.Tx.Commit() }

// Rollback rolls the transaction back (a no-op error after Commit).
func (t SQLTx) Rollback(context.Context) error { return t.Tx.Rollback() }

// BeginSQL is Do's Begin over a database/sql Beginner at isolation level.
func BeginSQL(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}, opts func(readOnly bool) *sql.TxOptions) Begin {
	return func(readOnly bool) (Tx, error) {
		tx, err := db.BeginTx(ctx, opts(readOnly))
		if err != nil {
			return nil, err
		}
		return NewSQLTx(tx), nil
	}
}
