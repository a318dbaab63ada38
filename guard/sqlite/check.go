package sqlite

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
//	INSERT INTO fence_guard AS g (resource, last_token, updated_at) VALUES (?1, ?2, <now>)
//	ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token, updated_at = excluded.updated_at
//	WHERE g.last_token <= excluded.last_token
//	RETURNING last_token
//
// An equal token is accepted (the current owner may write again). An older
// token is refused with *fence.StaleTokenError (errors.Is
// fence.ErrStaleToken) carrying both tokens; nothing changes and tx stays
// usable, but the caller must not commit its write — roll back.
//
// The statement takes SQLite's write lock, which the transaction then holds
// until it ends, so concurrent writers are serialised: the data and the
// token advance become visible together or not at all. Do the guarded write
// in the same transaction, after Check, and commit. Open the database with
// a busy timeout (_pragma=busy_timeout(5000)) so that writers wait for the
// lock instead of failing with SQLITE_BUSY, and with _txlock=immediate so a
// transaction that reads before it calls Check takes the lock at BEGIN.
//
// A token of 0 or above fence.MaxTokenJSONInt, or an empty, oversize or
// non-UTF-8 resource, is refused with *fence.InvalidError before any SQL runs.
func (g *Guard) Check(ctx context.Context, tx *sql.Tx, resource string, token fence.Token) error {
	return g.e.Check(ctx, sqlguard.NewSQLTx(tx), resource, token)
}
