package sqlguard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fenceworks/fence"
)

// Op names one idempotent fenced operation (the guards' Op has the same
// fields, in the same order).
type Op struct {
	Resource    string
	Token       fence.Token
	ID          string
	Payload     []byte
	SignedToken fence.SignedToken
}

// Signed returns the op's token with its proof: SignedToken when it is set
// (Token must then be 0 or the same number), else Token without a proof.
func (op Op) Signed() (fence.SignedToken, error) {
	if op.SignedToken.Token == 0 && !op.SignedToken.Signed() {
		return fence.SignedToken{Token: op.Token}, nil
	}
	if op.Token != 0 && op.Token != op.SignedToken.Token {
		return fence.SignedToken{}, fence.Invalid("token", "0 or SignedToken's token "+op.SignedToken.Token.String(), op.Token.String())
	}
	return op.SignedToken, nil
}

// validateOp checks op's fields, then its token's proof (with a key set),
// and returns op with Token set to the op's token.
func (e *Engine) validateOp(op Op) (Op, error) {
	st, err := op.Signed()
	if err != nil {
		return op, err
	}
	op.Token = st.Token
	if err := ValidateOp(op.Resource, op.Token, op.ID); err != nil {
		return op, err
	}
	if err := e.validate(op.Resource, op.ID); err != nil {
		return op, err
	}
	return op, e.keys.Verify(op.Resource, st)
}

// Do applies op at most once in one transaction from begin, in RunDo's
// order: check (taking the guard row's lock), look the op up (a found op is
// replayed, or refused as a conflict, even after a newer token), refuse a
// stale token, apply, save the op record, prune if due, commit. If the save
// hits a record another transaction saved first (Dialect.Duplicate), that
// record is replayed from a new read-only transaction. An error of apply is
// returned unchanged, after the rollback.
func (e *Engine) Do(ctx context.Context, begin Begin, op Op, apply func(Tx) ([]byte, error)) (result []byte, replayed bool, err error) {
	op, err = e.validateOp(op)
	if err != nil {
		return nil, false, err
	}
	hash := PayloadHash(op.Payload)
	tx, err := begin(false)
	if err != nil {
		return nil, false, fmt.Errorf("%s: do %q: begin: %w", e.d.Pkg, op.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // no-op after Commit

	var saveConflict bool
	steps := DoSteps{
		Check: func() error { return e.check(ctx, tx, op.Resource, op.Token) },
		// After Check this statement sees every op committed before the
		// guard row lock was granted (READ COMMITTED reads a new snapshot
		// per statement; SQLite has one writer).
		Lookup: func() ([]byte, bool, error) { return e.lookupOp(ctx, tx, op, hash) },
		Apply:  func() ([]byte, error) { return apply(tx) },
		Save: func(result []byte) error {
			_, err := tx.Exec(ctx, e.sql.SaveOp, op.Resource, op.ID, hash, result, int64(op.Token))
			if err != nil && e.d.Duplicate != nil && e.d.Duplicate(err) {
				saveConflict = true
			}
			if err != nil {
				return fmt.Errorf("%s: do %q: saving the op record: %w", e.d.Pkg, op.ID, e.noTable(err))
			}
			return nil
		},
		Commit: func() error {
			if err := tx.Commit(ctx); err != nil {
				return fmt.Errorf("%s: do %q: commit: %w", e.d.Pkg, op.ID, err)
			}
			return nil
		},
	}
	if e.pruner.Due() {
		steps.Prune = func() error {
			if _, err := tx.Exec(ctx, e.sql.PruneOne, op.Resource, e.d.Age(e.t.Retention)); err != nil {
				return fmt.Errorf("%s: do %q: pruning old op records: %w", e.d.Pkg, op.ID, e.noTable(err))
			}
			return nil
		}
	}
	result, replayed, err = RunDo(steps)
	if saveConflict {
		// Someone saved this op without holding the guard row lock (rows
		// written outside Do). Theirs stands: replay it.
		_ = tx.Rollback(ctx)
		return e.replayAfterConflict(ctx, begin, op, hash)
	}
	return result, replayed, err
}

// CheckOp is Do's first half in the caller's transaction tx: check the
// token, look the op up. See RunBegin for what its results mean.
func (e *Engine) CheckOp(ctx context.Context, tx Querier, op Op) (saved []byte, replayed bool, err error) {
	op, err = e.validateOp(op)
	if err != nil {
		return nil, false, err
	}
	hash := PayloadHash(op.Payload)
	return RunBegin(
		func() error { return e.check(ctx, tx, op.Resource, op.Token) },
		func() ([]byte, bool, error) { return e.lookupOp(ctx, tx, op, hash) },
	)
}

// SaveOp is Do's save and prune without the commit, in the caller's
// transaction tx. A duplicate record is reported wrapping
// Dialect.ErrOpSaved, if the dialect has one.
func (e *Engine) SaveOp(ctx context.Context, tx Querier, op Op, result []byte) error {
	op, err := e.validateOp(op)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, e.sql.SaveOp, op.Resource, op.ID, PayloadHash(op.Payload), result, int64(op.Token)); err != nil {
		if e.d.ErrOpSaved != nil && e.d.Duplicate != nil && e.d.Duplicate(err) {
			return fmt.Errorf("%s: saving op %q: %w (%w)", e.d.Pkg, op.ID, e.d.ErrOpSaved, err)
		}
		return fmt.Errorf("%s: saving op %q: %w", e.d.Pkg, op.ID, e.noTable(err))
	}
	if e.pruner.Due() {
		if _, err := tx.Exec(ctx, e.sql.PruneOne, op.Resource, e.d.Age(e.t.Retention)); err != nil {
			return fmt.Errorf("%s: op %q: pruning old op records: %w", e.d.Pkg, op.ID, e.noTable(err))
		}
	}
	return nil
}

// lookupOp returns the saved result of op if it was applied (found), or
// *fence.OpConflictError if it was applied with another payload.
func (e *Engine) lookupOp(ctx context.Context, q Querier, op Op, hash []byte) (result []byte, found bool, err error) {
	var savedHash, saved []byte
	switch err := q.QueryRow(ctx, e.sql.LookupOp, op.Resource, op.ID).Scan(&savedHash, &saved); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("%s: do %q: looking up the op: %w", e.d.Pkg, op.ID, e.noTable(err))
	}
	result, err = Replay(op.ID, savedHash, hash, saved)
	return result, true, err
}

func (e *Engine) replayAfterConflict(ctx context.Context, begin Begin, op Op, hash []byte) ([]byte, bool, error) {
	tx, err := begin(true)
	if err != nil {
		return nil, false, fmt.Errorf("%s: do %q: begin: %w", e.d.Pkg, op.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	saved, found, err := e.lookupOp(ctx, tx, op, hash)
	if err == nil && !found {
		err = fmt.Errorf("%s: do %q: the op record vanished after a duplicate-key error", e.d.Pkg, op.ID)
	}
	return saved, err == nil, err
}
