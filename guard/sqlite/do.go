package sqlite

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

// Do applies op at most once. In one transaction begun on db it
//
//  1. checks op.Token as Check does, which takes the database's write lock;
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
//     created_at) and commits.
//
// If fn returns an error, the transaction rolls back — the data and the
// token advance alike — and Do returns that error unchanged. If the commit
// fails, retrying with the same Op is safe, that is the point of op_id.
//
// Two concurrent Do calls with the same op_id never both apply: SQLite
// runs one writing transaction at a time, and the second finds the first's
// record. Because Do's first statement writes, it waits for the lock under
// the connection's busy_timeout; set one (_pragma=busy_timeout(5000)).
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
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("guard/sqlite: do %q: begin: %w", op.ID, err)
	}
	defer tx.Rollback() // no-op after Commit

	steps := sqlguard.DoSteps{
		Check:  func() error { return g.Check(ctx, tx, op.Resource, op.Token) },
		Lookup: func() ([]byte, bool, error) { return g.lookupOp(ctx, tx, op, hash) },
		Apply:  func() ([]byte, error) { return fn(tx) },
		Save: func(result []byte) error {
			if _, err := tx.ExecContext(ctx, g.sql.saveOp, op.Resource, op.ID, hash, result, int64(op.Token)); err != nil {
				return fmt.Errorf("guard/sqlite: do %q: saving the op record: %w", op.ID, g.noTable(err))
			}
			return nil
		},
		Commit: func() error {
			if err := tx.Commit(); err != nil {
				return fmt.Errorf("guard/sqlite: do %q: commit: %w", op.ID, err)
			}
			return nil
		},
	}
	if g.pruner.Due() {
		steps.Prune = func() error {
			if _, err := tx.ExecContext(ctx, g.sql.pruneOne, op.Resource, ageModifier(g.retention)); err != nil {
				return fmt.Errorf("guard/sqlite: do %q: pruning old op records: %w", op.ID, g.noTable(err))
			}
			return nil
		}
	}
	return sqlguard.RunDo(steps)
}

// lookupOp returns the saved result of op if it was applied (found), or
// *fence.OpConflictError if it was applied with another payload.
func (g *Guard) lookupOp(ctx context.Context, q Querier, op Op, hash []byte) (result []byte, found bool, err error) {
	var savedHash, saved []byte
	switch err := q.QueryRowContext(ctx, g.sql.lookupOp, op.Resource, op.ID).Scan(&savedHash, &saved); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("guard/sqlite: do %q: looking up the op: %w", op.ID, g.noTable(err))
	}
	result, err = sqlguard.Replay(op.ID, savedHash, hash, saved)
	return result, true, err
}
