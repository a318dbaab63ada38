package postgres

import (
	"context"

	"github.com/fenceworks/fence"
)

// Check advances the default guard table. See Guard.Check.
func Check(ctx context.Context, tx Tx, resource string, token fence.Token) error {
	return defaultGuard.Check(ctx, tx, resource, token)
}

// Check accepts token for resource if it is at least the last token accepted
// there, and records it as the last accepted — in one statement, inside the
// caller's transaction tx (a pgx.Tx; a pool or a bare connection does not
// compile, see Tx):
//
//	INSERT INTO fence_guard AS g (resource, last_token, updated_at) VALUES ($1, $2, now())
//	ON CONFLICT (resource) DO UPDATE SET last_token = EXCLUDED.last_token, updated_at = now()
//	WHERE g.last_token <= EXCLUDED.last_token
//	RETURNING last_token
//
// An equal token is accepted (the current owner may write again). An older
// token is refused with *fence.StaleTokenError (errors.Is
// fence.ErrStaleToken) carrying both tokens; nothing changes and tx stays
// usable, but the caller must not commit its write — roll back.
//
// The statement locks the guard row until tx ends, so concurrent writers to
// the same resource are serialised: a writer with an older token waits for
// the newer one to commit and is then refused. Do the guarded write in the
// same transaction, after Check, and commit: the data and the token advance
// become visible together or not at all.
//
// Under REPEATABLE READ or SERIALIZABLE isolation a concurrent advance makes
// the statement fail with a serialization error (SQLSTATE 40001) that the
// caller retries like any other; READ COMMITTED (PostgreSQL's default) never
// does.
//
// A token of 0 or above fence.MaxTokenJSONInt, or an empty, oversize or
// non-UTF-8 resource, or one holding a NUL byte (PostgreSQL text cannot), is
// refused with *fence.InvalidError before any SQL runs.
//
// With a key set (Options.KeySet) use CheckSigned: the number alone carries
// no proof and is refused with *fence.ForgedTokenError ("no proof") unless
// Options.AllowUnsigned.
func (g *Guard) Check(ctx context.Context, tx Tx, resource string, token fence.Token) error {
	return g.CheckSigned(ctx, tx, resource, fence.SignedToken{Token: token})
}

// CheckSigned checks the default guard table. See Guard.CheckSigned.
func CheckSigned(ctx context.Context, tx Tx, resource string, token fence.SignedToken) error {
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
func (g *Guard) CheckSigned(ctx context.Context, tx Tx, resource string, token fence.SignedToken) error {
	return g.e.Check(ctx, querier{tx, tx}, resource, token)
}

// Verify checks token's proof for resource as CheckSigned does, without
// touching the database: nil when g has no key set. Use it before a
// column-pattern UPDATE, which compares the number by itself.
func (g *Guard) Verify(resource string, token fence.SignedToken) error {
	return g.e.Verify(resource, token)
}
