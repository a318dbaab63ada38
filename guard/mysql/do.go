package mysql

import (
	"context"
	"database/sql"
	"errors"

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
	// SignedToken is the writer's token with its proof
	// (lease.SignedToken()), required when the guard has a key set (see
	// CheckSigned). When it is set it is the op's token: leave Token 0 (or
	// the same number; another is *fence.InvalidError, field "token").
	SignedToken fence.SignedToken
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
	return g.e.Do(ctx, begin(ctx, db), sqlguard.Op(op), func(tx sqlguard.Tx) ([]byte, error) { return fn(tx.(sqlguard.SQLTx).Tx) })
}

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
	return g.e.CheckOp(ctx, sqlguard.NewSQLTx(tx), sqlguard.Op(op))
}

// SaveOp is Do's step 5 without the commit: it saves op's record with
// result in tx (created_at = UTC_TIMESTAMP(6) now), and once in
// Options.PruneEvery calls also removes op.Resource's records older than
// Retention. Call it after CheckOp accepted and the op was applied in tx;
// the record commits with the write.
func (g *Guard) SaveOp(ctx context.Context, tx *sql.Tx, op Op, result []byte) error {
	return g.e.SaveOp(ctx, sqlguard.NewSQLTx(tx), sqlguard.Op(op), result)
}
