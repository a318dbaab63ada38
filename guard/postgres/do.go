package postgres

import (
	"context"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
	"github.com/jackc/pgx/v5"
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
	// SignedToken is the writer's token with its proof
	// (lease.SignedToken()), required when the guard has a key set (see
	// CheckSigned). When it is set it is the op's token: leave Token 0 (or
	// the same number; another is *fence.InvalidError, field "token").
	SignedToken fence.SignedToken
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
	begin := func(readOnly bool) (sqlguard.Tx, error) {
		opts := pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
		if readOnly {
			opts.AccessMode = pgx.ReadOnly
		}
		tx, err := db.BeginTx(ctx, opts)
		if err != nil {
			return nil, err
		}
		return newTx(tx), nil
	}
	return g.e.Do(ctx, begin, sqlguard.Op(op), func(tx sqlguard.Tx) ([]byte, error) { return fn(tx.(engineTx).tx) })
}

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
	return g.e.CheckOp(ctx, querier{tx, tx}, sqlguard.Op(op))
}

// SaveOp is Do's step 5 without the commit: it saves op's record with
// result in tx (stamped clock_timestamp()), and once in Options.PruneEvery
// calls also removes op.Resource's records older than Retention. Call it
// after CheckOp accepted and the op was applied in tx; the record commits
// with the write.
func (g *Guard) SaveOp(ctx context.Context, tx Tx, op Op, result []byte) error {
	return g.e.SaveOp(ctx, querier{tx, tx}, sqlguard.Op(op), result)
}
