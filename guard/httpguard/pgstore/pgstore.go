// Package pgstore is the PostgreSQL Store of httpguard: the middleware's
// check is guard/postgres's Check inside a pgx transaction that the handler
// then writes its data in. Atomic across processes and hosts: the guard row
// stays locked until the transaction ends.
//
// Under REPEATABLE READ or SERIALIZABLE (Store.TxOptions) the database may
// abort a transaction with a serialization failure (SQLSTATE 40001), and
// under any level with a deadlock (40P01). Nothing was applied then, and the
// same request may simply be sent again: when that happens in Begin or
// Commit the middleware answers 503 Service Unavailable with Retry-After
// (httpguard.RetryableError), not 500. A handler whose own statement fails
// that way answers httpguard.WriteError(w, pgstore.Retryable(err)).
package pgstore

import (
	"context"
	"errors"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Store begins a transaction on DB and checks the token in it.
type Store struct {
	DB    postgres.Beginner // a *pgxpool.Pool, usually
	Guard *postgres.Guard   // nil: postgres.Default() (table fence_guard)
	// TxOptions for the transaction (default: READ COMMITTED, read-write).
	TxOptions pgx.TxOptions
}

// Begin starts a transaction and runs the guard's Check in it. A refused
// check rolls the transaction back and returns the refusal; a serialization
// failure or deadlock is returned as a *httpguard.RetryableError.
func (s *Store) Begin(ctx context.Context, resource string, token fence.Token) (httpguard.Tx, error) {
	g := s.Guard
	if g == nil {
		g = postgres.Default()
	}
	tx, err := s.DB.BeginTx(ctx, s.TxOptions)
	if err != nil {
		return nil, Retryable(err)
	}
	if err := g.Check(ctx, tx, resource, token); err != nil {
		_ = tx.Rollback(ctx)
		return nil, Retryable(err)
	}
	return guardTx{tx}, nil
}

// BeginOp starts a transaction and runs the guard's CheckOp in it (the op
// lookup decides before the token: see httpguard.OpStore). The op's answer
// is saved in the guard's op table (fence_ops), with the handler's writes.
func (s *Store) BeginOp(ctx context.Context, op httpguard.Op) (httpguard.OpTx, []byte, bool, error) {
	g := s.Guard
	if g == nil {
		g = postgres.Default()
	}
	tx, err := s.DB.BeginTx(ctx, s.TxOptions)
	if err != nil {
		return nil, nil, false, Retryable(err)
	}
	pop := postgres.Op{Resource: op.Resource, Token: op.Token, ID: op.ID, Payload: op.Payload}
	saved, replayed, err := g.CheckOp(ctx, tx, pop)
	if err != nil || replayed {
		_ = tx.Rollback(ctx)
		return nil, saved, replayed, Retryable(err)
	}
	return opTx{guardTx{tx}, g, pop}, nil, false, nil
}

// opTx is the transaction of a request with an op_id.
type opTx struct {
	guardTx
	g  *postgres.Guard
	op postgres.Op
}

func (t opTx) SaveOp(ctx context.Context, answer []byte) error {
	return Retryable(t.g.SaveOp(ctx, t.Tx, t.op, answer))
}

// guardTx is the request's pgx.Tx; its Commit reports a serialization
// failure or deadlock as a *httpguard.RetryableError.
type guardTx struct{ pgx.Tx }

func (t guardTx) Commit(ctx context.Context) error { return Retryable(t.Tx.Commit(ctx)) }

// Retryable returns err wrapped in a *httpguard.RetryableError if it is a
// PostgreSQL serialization failure (SQLSTATE 40001) or deadlock (40P01) —
// the transaction was aborted, nothing was applied, and the request may be
// sent again — and err unchanged otherwise (nil stays nil).
func Retryable(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") {
		return &httpguard.RetryableError{Err: err}
	}
	return err
}

// Tx returns the request's guard transaction, to write the fenced data in.
func Tx(ctx context.Context) (pgx.Tx, bool) {
	f, ok := httpguard.FromContext(ctx)
	if !ok {
		return nil, false
	}
	switch tx := f.Tx.(type) {
	case guardTx:
		return tx.Tx, true
	case opTx:
		return tx.Tx, true
	}
	return nil, false
}
