package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// ErrOpSaved: SaveOp found the op already saved — another transaction
// applied it and committed after this transaction's snapshot was taken
// (REPEATABLE READ with reads before CheckOp), so CheckOp did not see it.
// The op table's primary key refused the second record; roll back (nothing
// of this attempt commits) and retry with the same op: the retry replays.
// IsRetryable reports it.
var ErrOpSaved = errors.New("the op was saved by a transaction that committed after this one's snapshot")

// CheckOp runs with the default Guard. See Guard.CheckOp.
func CheckOp(ctx context.Context, tx *sql.Tx, op Op) (saved []byte, replayed bool, err error) {
	return defaultGuard.CheckOp(ctx, tx, op)
}

// SaveOp runs with the default Guard. See Guard.SaveOp.
func SaveOp(ctx context.Context, tx *sql.Tx, op Op, result []byte) error {
	return defaultGuard.SaveOp(ctx, tx, op, result)
}

// CheckOp is Do's first half, in the caller's transaction tx, for callers
// that cannot hand Do a function (an HTTP handler's write): it checks
// op.Token as Check does (taking the guard row lock), then looks the op up.
// It returns
//
//   - replayed = true and the saved result, if the op was applied before —
//     even if its token has since been overtaken (the replay comes first,
//     as in Do); the caller rolls back and answers the saved result;
//   - *fence.OpConflictError if it was applied with another payload;
//   - *fence.StaleTokenError if it is new and the token is stale;
//   - replayed = false and no error: apply the op in tx, then SaveOp, then
//     commit.
//
// Begin tx with READ COMMITTED (Do's level): then the lookup sees every op
// committed before the guard row lock was granted. Under REPEATABLE READ it
// does too if CheckOp is the transaction's first read (InnoDB takes the
// snapshot at the first plain read); after earlier reads it may miss an op
// committed since, and the op table's primary key then makes SaveOp fail
// with ErrOpSaved: nothing is applied twice; roll back and retry with the
// same op, the retry replays.
func (g *Guard) CheckOp(ctx context.Context, tx *sql.Tx, op Op) (saved []byte, replayed bool, err error) {
	if err := sqlguard.ValidateOp(op.Resource, op.Token, op.ID); err != nil {
		return nil, false, err
	}
	hash := sqlguard.PayloadHash(op.Payload)
	return sqlguard.RunBegin(
		func() error { return g.Check(ctx, tx, op.Resource, op.Token) },
		func() ([]byte, bool, error) { return g.lookupOp(ctx, tx, op, hash) },
	)
}

// SaveOp is Do's step 5 without the commit: it saves op's record with
// result in tx (created_at = UTC_TIMESTAMP(6) now), and once in
// Options.PruneEvery calls also removes op.Resource's records older than
// Retention. Call it after CheckOp accepted and the op was applied in tx;
// the record commits with the write.
func (g *Guard) SaveOp(ctx context.Context, tx *sql.Tx, op Op, result []byte) error {
	if err := sqlguard.ValidateOp(op.Resource, op.Token, op.ID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, g.sql.saveOp, op.Resource, op.ID, sqlguard.PayloadHash(op.Payload), result, int64(op.Token)); err != nil {
		if isDupEntry(err) {
			return fmt.Errorf("guard/mysql: saving op %q: %w (%w)", op.ID, ErrOpSaved, err)
		}
		return fmt.Errorf("guard/mysql: saving op %q: %w", op.ID, g.noTable(err))
	}
	if g.pruner.Due() {
		if _, err := tx.ExecContext(ctx, g.sql.pruneOne, op.Resource, g.retention.Microseconds()); err != nil {
			return fmt.Errorf("guard/mysql: op %q: pruning old op records: %w", op.ID, g.noTable(err))
		}
	}
	return nil
}
