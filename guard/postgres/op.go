package postgres

import (
	"context"
	"fmt"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// CheckOp runs with the default Guard. See Guard.CheckOp.
func CheckOp(ctx context.Context, tx Tx, op Op) (saved []byte, replayed bool, err error) {
	return defaultGuard.CheckOp(ctx, tx, op)
}

// SaveOp runs with the default Guard. See Guard.SaveOp.
func SaveOp(ctx context.Context, tx Tx, op Op, result []byte) error {
	return defaultGuard.SaveOp(ctx, tx, op, result)
}

// CheckOp is Do's first half, in the caller's transaction tx, for callers
// that cannot hand Do a function (httpguard's pgstore, whose write is made
// by an HTTP handler): it checks op.Token as Check does (taking the guard
// row lock), then looks the op up. It returns
//
//   - replayed = true and the saved result, if the op was applied before —
//     even if its token has since been overtaken (the replay comes first,
//     as in Do); the caller rolls back and answers the saved result;
//   - *fence.OpConflictError if it was applied with another payload;
//   - *fence.StaleTokenError if it is new and the token is stale;
//   - replayed = false and no error: apply the op in tx, then SaveOp, then
//     commit.
//
// Under READ COMMITTED (Do's level) the lookup sees every op committed
// before the guard row lock was granted.
func (g *Guard) CheckOp(ctx context.Context, tx Tx, op Op) (saved []byte, replayed bool, err error) {
	if err := sqlguard.ValidateOp(op.Resource, op.Token, op.ID); err != nil {
		return nil, false, err
	}
	if err := validateText(op.Resource, op.ID); err != nil {
		return nil, false, err
	}
	hash := sqlguard.PayloadHash(op.Payload)
	return sqlguard.RunBegin(
		func() error { return g.Check(ctx, tx, op.Resource, op.Token) },
		func() ([]byte, bool, error) { return g.lookupOp(ctx, tx, op, hash) },
	)
}

// SaveOp is Do's step 5 without the commit: it saves op's record with
// result in tx (stamped clock_timestamp()), and once in Options.PruneEvery
// calls also removes op.Resource's records older than Retention. Call it
// after CheckOp accepted and the op was applied in tx; the record commits
// with the write.
func (g *Guard) SaveOp(ctx context.Context, tx Tx, op Op, result []byte) error {
	if err := sqlguard.ValidateOp(op.Resource, op.Token, op.ID); err != nil {
		return err
	}
	if err := validateText(op.Resource, op.ID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, g.sql.saveOp, op.Resource, op.ID, sqlguard.PayloadHash(op.Payload), result, int64(op.Token)); err != nil {
		return fmt.Errorf("guard/postgres: saving op %q: %w", op.ID, g.noTable(err))
	}
	if g.pruner.Due() {
		if _, err := tx.Exec(ctx, g.sql.pruneOne, op.Resource, g.retention.Seconds()); err != nil {
			return fmt.Errorf("guard/postgres: op %q: pruning old op records: %w", op.ID, g.noTable(err))
		}
	}
	return nil
}
