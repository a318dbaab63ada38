package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
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
func Do(ctx context.Context, db Beginner, op Op, fn func(tx *sql.Tx) ([]byte, error)) (result []byte, replayed bool, err error) {
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
//     created_at = UTC_TIMESTAMP(6) at the save) and commits.
//
// READ COMMITTED because the lookup must see every op committed before the
// guard row lock was granted: each statement reads a fresh snapshot there,
// while REPEATABLE READ could keep an older one. It also keeps InnoDB from
// taking gap locks in the lookup and the pruning DELETE.
//
// If fn returns an error, the transaction rolls back — the data and the
// token advance alike — and Do returns that error unchanged. If the commit
// fails, the outcome may be unknown (a lost connection); retrying with the
// same Op is safe, that is the point of op_id. A deadlock or a lock wait
// timeout is returned wrapped (IsRetryable reports it): nothing was applied,
// run Do again with the same Op.
//
// Two concurrent Do calls with the same op_id never both apply: the second
// waits on the guard row lock, then finds the first's record and replays it.
//
// Retention: see Options.Retention and Options.PruneEvery, and Prune. A
// retry that comes after its record was removed is treated as new.
//
// Invalid input (see Check; an empty or oversize op.ID) is refused with
// *fence.InvalidError before any SQL runs.
func (g *Guard) Do(ctx context.Context, db Beginner, op Op, fn func(tx *sql.Tx) ([]byte, error)) (result []byte, replayed bool, err error) {
	if err := sqlguard.ValidateOp(op.Resource, op.Token, op.ID); err != nil {
		return nil, false, err
	}
	hash := sqlguard.PayloadHash(op.Payload)
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, false, fmt.Errorf("guard/mysql: do %q: begin: %w", op.ID, err)
	}
	defer tx.Rollback() // no-op after Commit

	var saveConflict bool
	steps := sqlguard.DoSteps{
		Check: func() error { return g.Check(ctx, tx, op.Resource, op.Token) },
		// After Check this statement sees every op committed before we got
		// the guard row lock (READ COMMITTED reads a new snapshot per
		// statement).
		Lookup: func() ([]byte, bool, error) { return g.lookupOp(ctx, tx, op, hash) },
		Apply:  func() ([]byte, error) { return fn(tx) },
		Save: func(result []byte) error {
			_, err := tx.ExecContext(ctx, g.sql.saveOp, op.Resource, op.ID, hash, result, int64(op.Token))
			if isDupEntry(err) {
				saveConflict = true
			}
			if err != nil {
				return fmt.Errorf("guard/mysql: do %q: saving the op record: %w", op.ID, g.noTable(err))
			}
			return nil
		},
		Commit: func() error {
			if err := tx.Commit(); err != nil {
				return fmt.Errorf("guard/mysql: do %q: commit: %w", op.ID, err)
			}
			return nil
		},
	}
	if g.pruner.Due() {
		steps.Prune = func() error {
			if _, err := tx.ExecContext(ctx, g.sql.pruneOne, op.Resource, g.retention.Microseconds()); err != nil {
				return fmt.Errorf("guard/mysql: do %q: pruning old op records: %w", op.ID, g.noTable(err))
			}
			return nil
		}
	}
	result, replayed, err = sqlguard.RunDo(steps)
	if saveConflict {
		// Someone saved this op without holding the guard row lock (rows
		// written outside Do). Theirs stands: replay it.
		_ = tx.Rollback()
		return g.replayAfterConflict(ctx, db, op, hash)
	}
	return result, replayed, err
}

// lookupOp returns the saved result of op if it was applied (found), or
// *fence.OpConflictError if it was applied with another payload.
func (g *Guard) lookupOp(ctx context.Context, q Querier, op Op, hash []byte) (result []byte, found bool, err error) {
	var savedHash, saved []byte
	switch err := q.QueryRowContext(ctx, g.sql.lookupOp, op.Resource, op.ID).Scan(&savedHash, &saved); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("guard/mysql: do %q: looking up the op: %w", op.ID, g.noTable(err))
	}
	result, err = sqlguard.Replay(op.ID, savedHash, hash, saved)
	return result, true, err
}

func (g *Guard) replayAfterConflict(ctx context.Context, db Beginner, op Op, hash []byte) ([]byte, bool, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted, ReadOnly: true})
	if err != nil {
		return nil, false, fmt.Errorf("guard/mysql: do %q: begin: %w", op.ID, err)
	}
	defer tx.Rollback()
	saved, found, err := g.lookupOp(ctx, tx, op, hash)
	if err == nil && !found {
		err = fmt.Errorf("guard/mysql: do %q: the op record vanished after a duplicate-key error", op.ID)
	}
	return saved, err == nil, err
}
