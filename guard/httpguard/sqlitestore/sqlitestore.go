// Package sqlitestore is the SQLite Store of httpguard: the middleware's
// check is guard/sqlite's Check inside a *sql.Tx that the handler then
// writes its data in. Atomic across the processes of one host sharing the
// database file: the transaction holds SQLite's write lock until it ends.
// Open the database with _pragma=busy_timeout(5000) and _txlock=immediate.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard"
	"github.com/fenceworks/fence/guard/sqlite"
)

// Store begins a transaction on DB and checks the token in it.
type Store struct {
	DB    sqlite.Beginner // a *sql.DB, usually
	Guard *sqlite.Guard   // nil: sqlite.Default() (table fence_guard)
}

// Begin starts a transaction and runs the guard's Check in it. A refused
// check rolls the transaction back and returns the refusal.
func (s *Store) Begin(ctx context.Context, resource string, token fence.Token) (httpguard.Tx, error) {
	g := s.Guard
	if g == nil {
		g = sqlite.Default()
	}
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if err := g.Check(ctx, tx, resource, token); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return sqlTx{tx}, nil
}

// BeginOp starts a transaction and runs the guard's CheckOp in it (the op
// lookup decides before the token: see httpguard.OpStore). The op's answer
// is saved in the guard's op table (fence_ops), with the handler's writes.
func (s *Store) BeginOp(ctx context.Context, op httpguard.Op) (httpguard.OpTx, []byte, bool, error) {
	g := s.Guard
	if g == nil {
		g = sqlite.Default()
	}
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, false, err
	}
	sop := sqlite.Op{Resource: op.Resource, Token: op.Token, ID: op.ID, Payload: op.Payload}
	saved, replayed, err := g.CheckOp(ctx, tx, sop)
	if err != nil || replayed {
		_ = tx.Rollback()
		return nil, saved, replayed, err
	}
	return sqlOpTx{sqlTx{tx}, g, sop}, nil, false, nil
}

// sqlOpTx is the transaction of a request with an op_id.
type sqlOpTx struct {
	sqlTx
	g  *sqlite.Guard
	op sqlite.Op
}

func (t sqlOpTx) SaveOp(ctx context.Context, answer []byte) error {
	return t.g.SaveOp(ctx, t.tx, t.op, answer)
}

// sqlTx adapts *sql.Tx to httpguard.Tx.
type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) Commit(context.Context) error   { return done(t.tx.Commit()) }
func (t sqlTx) Rollback(context.Context) error { return done(t.tx.Rollback()) }

func done(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return httpguard.ErrTxDone
	}
	return err
}

// Tx returns the request's guard transaction, to write the fenced data in.
func Tx(ctx context.Context) (*sql.Tx, bool) {
	f, ok := httpguard.FromContext(ctx)
	if !ok {
		return nil, false
	}
	switch t := f.Tx.(type) {
	case sqlTx:
		return t.tx, true
	case sqlOpTx:
		return t.tx, true
	}
	return nil, false
}
