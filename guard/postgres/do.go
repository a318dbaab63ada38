package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Op names one idempotent fenced operation.
type Op struct {
	Resource string      // the guarded resource, as in Check
	Token    fence.Token // the writer's fencing token
	ID       string      // op_id: the same for every retry of this operation, unique otherwise (1–256 bytes)
	// Payload identifies the request (e.g. its encoded arguments). A retry
	// must carry the same payload; a different payload under a used ID is
	// refused with *fence.OpConflictError. Only its SHA-256 is stored.
	Payload []byte
}

// Do runs op with the default Guard. See Guard.Do.
func Do(ctx context.Context, db Beginner, op Op, fn func(tx pgx.Tx) ([]byte, error)) (result []byte, replayed bool, err error) {
	return defaultGuard.Do(ctx, db, op, fn)
}

// Do applies op at most once. In one READ COMMITTED transaction begun on db
// it
//
//  1. checks op.Token as Check does, which locks the resource's guard row;
//  2. looks up (op.Resource, op.ID) in the op table: if it is there, the op
//     was applied before — Do rolls back and returns its saved result with
//     replayed = true, without calling fn (or *fence.OpConflictError if the
//     payload differs). This happens even if the token has since been
//     overtaken: a retry of an applied op learns its result, it is not
//     refused as stale;
//  3. otherwise, if the token was refused, returns the *fence.StaleTokenError;
//  4. calls fn(tx) — fn makes the protected write in tx and returns the
//     result to remember (it must not commit or roll back tx);
//  5. saves the op record (resource, op_id, payload hash, result, token,
//     created_at) and commits. created_at is clock_timestamp() at the save,
//     not the transaction's start (now()): a transaction that waited longer
//     than Retention is still kept Retention after it saved.
//
// If fn returns an error, the transaction rolls back — the data and the
// token advance alike — and Do returns that error unchanged. If the commit
// fails, the outcome may be unknown (a lost connection); retrying with the
// same Op is safe, that is the point of op_id.
//
// Two concurrent Do calls with the same op_id never both apply: the second
// waits on the guard row lock, then finds the first's record and replays it.
//
// Retention: see Options.Retention and Options.PruneEvery, and Prune. A
// retry that comes after its record was removed is treated as new.
//
// Invalid input (see Check; an empty or oversize op.ID, or one that is not
// UTF-8 or holds a NUL byte) is refused with *fence.InvalidError before any
// SQL runs.
func (g *Guard) Do(ctx context.Context, db Beginner, op Op, fn func(tx pgx.Tx) ([]byte, error)) (result []byte, replayed bool, err error) {
	if err := sqlguard.ValidateOp(op.Resource, op.Token, op.ID); err != nil {
		return nil, false, err
	}
	if err := validateText(op.Resource, op.ID); err != nil {
		return nil, false, err
	}
	hash := sqlguard.PayloadHash(op.Payload)
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, false, fmt.Errorf("guard/postgres: do %q: begin: %w", op.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // no-op after Commit

	var saveConflict bool
	steps := sqlguard.DoSteps{
		Check: func() error { return g.Check(ctx, tx, op.Resource, op.Token) },
		// After Check this statement sees every op committed before we got
		// the guard row lock (READ COMMITTED takes a new snapshot per
		// statement).
		Lookup: func() ([]byte, bool, error) { return g.lookupOp(ctx, tx, op, hash) },
		Apply:  func() ([]byte, error) { return fn(tx) },
		Save: func(result []byte) error {
			_, err := tx.Exec(ctx, g.sql.saveOp, op.Resource, op.ID, hash, result, int64(op.Token))
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" {
				saveConflict = true
			}
			if err != nil {
				return fmt.Errorf("guard/postgres: do %q: saving the op record: %w", op.ID, g.noTable(err))
			}
			return nil
		},
		Commit: func() error {
			if err := tx.Commit(ctx); err != nil {
				return fmt.Errorf("guard/postgres: do %q: commit: %w", op.ID, err)
			}
			return nil
		},
	}
	if g.pruner.Due() {
		steps.Prune = func() error {
			if _, err := tx.Exec(ctx, g.sql.pruneOne, op.Resource, g.retention.Seconds()); err != nil {
				return fmt.Errorf("guard/postgres: do %q: pruning old op records: %w", op.ID, g.noTable(err))
			}
			return nil
		}
	}
	result, replayed, err = sqlguard.RunDo(steps)
	if saveConflict {
		// Someone saved this op without holding the guard row lock (rows
		// written outside Do). Theirs stands: replay it.
		_ = tx.Rollback(ctx)
		return g.replayAfterConflict(ctx, db, op, hash)
	}
	return result, replayed, err
}

// lookupOp returns the saved result of op if it was applied (found), or
// *fence.OpConflictError if it was applied with another payload.
func (g *Guard) lookupOp(ctx context.Context, q Querier, op Op, hash []byte) (result []byte, found bool, err error) {
	var savedHash, saved []byte
	switch err := q.QueryRow(ctx, g.sql.lookupOp, op.Resource, op.ID).Scan(&savedHash, &saved); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("guard/postgres: do %q: looking up the op: %w", op.ID, g.noTable(err))
	}
	result, err = sqlguard.Replay(op.ID, savedHash, hash, saved)
	return result, true, err
}

func (g *Guard) replayAfterConflict(ctx context.Context, db Beginner, op Op, hash []byte) ([]byte, bool, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, false, fmt.Errorf("guard/postgres: do %q: begin: %w", op.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	saved, found, err := g.lookupOp(ctx, tx, op, hash)
	if err == nil && !found {
		err = fmt.Errorf("guard/postgres: do %q: the op record vanished after a duplicate-key error", op.ID)
	}
	return saved, err == nil, err
}
