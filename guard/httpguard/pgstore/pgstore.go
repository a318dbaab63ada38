// Package pgstore is the PostgreSQL Store of httpguard: the middleware's
// check is guard/postgres's Check inside a pgx transaction that the handler
// then writes its data in. Atomic across processes and hosts: the guard row
// stays locked until the transaction ends.
package pgstore

import (
	"context"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
)

// Store begins a transaction on DB and checks the token in it.
type Store struct {
	DB    postgres.Beginner // a *pgxpool.Pool, usually
	Guard *postgres.Guard   // nil: postgres.Default() (table fence_guard)
	// TxOptions for the transaction (default: READ COMMITTED, read-write).
	TxOptions pgx.TxOptions
}

// Begin starts a transaction and runs the guard's Check in it. A refused
// check rolls the transaction back and returns the refusal.
func (s *Store) Begin(ctx context.Context, resource string, token fence.Token) (httpguard.Tx, error) {
	g := s.Guard
	if g == nil {
		g = postgres.Default()
	}
	tx, err := s.DB.BeginTx(ctx, s.TxOptions)
	if err != nil {
		return nil, err
	}
	if err := g.Check(ctx, tx, resource, token); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return tx, nil // pgx.Tx is an httpguard.Tx
}

// Tx returns the request's guard transaction, to write the fenced data in.
func Tx(ctx context.Context) (pgx.Tx, bool) {
	f, ok := httpguard.FromContext(ctx)
	if !ok {
		return nil, false
	}
	tx, ok := f.Tx.(pgx.Tx)
	return tx, ok
}
