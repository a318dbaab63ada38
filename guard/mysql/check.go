package mysql

import (
	"context"
	"database/sql"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// Check advances the default guard table. See Guard.Check.
func Check(ctx context.Context, tx *sql.Tx, resource string, token fence.Token) error {
	return defaultGuard.Check(ctx, tx, resource, token)
}

// Check accepts token for resource if it is at least the last token accepted
// there, and records it as the last accepted — in one statement, inside the
// caller's transaction tx (a *sql.Tx: on a *sql.DB the check would commit by
// itself, apart from the caller's write):
//
//	INSERT INTO fence_guard (resource, last_token, updated_at) VALUES (?, ?, UTC_TIMESTAMP(6))
//	ON DUPLICATE KEY UPDATE
//		updated_at = IF(last_token <= ?, UTC_TIMESTAMP(6), updated_at),
//		last_token = IF(last_token <= ?, ?, last_token)
//
// An equal token is accepted (the current owner may write again). An older
// token is refused with *fence.StaleTokenError (errors.Is
// fence.ErrStaleToken) carrying both tokens; nothing changes and tx stays
// usable, but the caller must not commit its write — roll back.
//
// The statement takes an exclusive lock on the resource's guard row (a new
// row, or the existing one on the duplicate key) and compares against the
// row's latest committed version, not the transaction's snapshot, under
// every isolation level; the lock is held until tx ends, so writers of one
// resource are serialised: an older writer waits for the newer one's commit
// and is then refused. The outcome is read from the row itself: when the
// statement reports 2 affected rows the row was changed, which only an
// accepted token does; otherwise Check reads last_token with SELECT … FOR
// UPDATE (a locking read: the latest version, which this transaction has
// locked) and accepts if it equals token. The connection's clientFoundRows
// setting therefore cannot turn a refusal into an acceptance. See the
// package documentation for why this is atomic.
//
// A deadlock (error 1213, the whole transaction rolled back) or a lock wait
// timeout (1205) is returned wrapped; IsRetryable reports both: roll back and
// run the transaction again.
//
// A token of 0 or above fence.MaxTokenJSONInt, or an empty, oversize or
// non-UTF-8 resource, is refused with *fence.InvalidError before any SQL runs.
//
// With a key set (Options.KeySet) use CheckSigned: the number alone carries
// no proof and is refused with *fence.ForgedTokenError ("no proof") unless
// Options.AllowUnsigned.
func (g *Guard) Check(ctx context.Context, tx *sql.Tx, resource string, token fence.Token) error {
	return g.CheckSigned(ctx, tx, resource, fence.SignedToken{Token: token})
}

// CheckSigned checks the default guard table. See Guard.CheckSigned.
func CheckSigned(ctx context.Context, tx *sql.Tx, resource string, token fence.SignedToken) error {
	return defaultGuard.CheckSigned(ctx, tx, resource, token)
}

// CheckSigned is Check for a token with its proof (lease.SignedToken(), or
// fence.ParseSignedToken of its text form). With a key set it first
// verifies, in Go, that the proof holds for the lock of resource
// (Options.LockFor) under a key of the cluster: a token without a proof, a
// tampered one, another lock's or another cluster's proof is refused with
// *fence.ForgedTokenError (errors.Is fence.ErrForgedToken) before any SQL
// runs, so the guard row is unchanged and tx stays usable. Then it compares
// as Check does. Without a key set the proof is not looked at.
func (g *Guard) CheckSigned(ctx context.Context, tx *sql.Tx, resource string, token fence.SignedToken) error {
	return g.e.Check(ctx, sqlguard.NewSQLTx(tx), resource, token)
}

// Verify checks token's proof for resource as CheckSigned does, without
// touching the database: nil when g has no key set. Use it before a
// column-pattern UPDATE, which compares the number by itself.
func (g *Guard) Verify(resource string, token fence.SignedToken) error {
	return g.e.Verify(resource, token)
}
