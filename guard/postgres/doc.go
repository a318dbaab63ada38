// Package postgres makes a PostgreSQL database refuse writes from a lock
// owner that is no longer current: the fencing-token check at the side
// effect, in the same transaction as the write.
//
// A worker whose lease expired while it was paused does not know it; when it
// wakes it writes anyway. Checking the token beforehand in a separate request
// does not help — another owner can intervene between the read and the
// write. The check must be one atomic step with the write. Check does that
// with one statement in the caller's own transaction:
//
//	tx, _ := pool.Begin(ctx)
//	defer tx.Rollback(ctx)
//	if err := postgres.Check(ctx, tx, "sku-42", lease.Token()); err != nil {
//		return err // *fence.StaleTokenError: a newer owner has written
//	}
//	tx.Exec(ctx, `UPDATE stock SET qty = $1 WHERE sku = $2`, 8, "sku-42")
//	return tx.Commit(ctx)
//
// The guard table keeps, per resource, the last token accepted (Migrate
// creates it; the DDL is on Guard.Migrate). A token equal to the last is
// accepted, an older one refused with both numbers. The row lock Check takes
// serialises the writers of one resource until commit.
//
// # Three ways to use it
//
//   - Check in your transaction, as above: the guard table holds the token.
//   - The column pattern: keep the token in your own row and let the UPDATE
//     compare it (UPDATE stock SET qty = $1, fence_token = $2 WHERE sku = $3
//     AND fence_token <= $2); Column.CheckRows says why 0 rows changed.
//   - Do: an idempotent operation. Check, look up its op_id, call your
//     function, save its result — one transaction. A retry with the same
//     op_id returns the saved result without applying again, even after a
//     newer token took over; the same op_id with a different payload is
//     refused with *fence.OpConflictError. CheckOp and SaveOp are Do split
//     in two, in your own transaction, for callers that cannot pass Do a
//     function (httpguard's stores).
//
// # Retention of op records
//
// An op record is kept at least Options.Retention (default 24h), counted
// from when Do saved it (clock_timestamp(), not the transaction's start). One Do
// call in Options.PruneEvery (default 1000) also deletes its own resource's
// records older than that, inside its transaction; Prune deletes old records
// of every resource and is meant for a periodic job. A retry whose record has
// been removed is applied again as a new op, and its token is still checked.
//
// # Signed tokens
//
// With Options.KeySet (the Fence cluster's public keys, `fence keys --json`,
// read with fence.ParseKeySet) the guard verifies a token's proof before
// it compares: CheckSigned(ctx, tx, resource, lease.SignedToken()), or
// Op.SignedToken for Do. A token without a proof, or whose proof does not
// hold for the resource's lock (Options.LockFor, default the resource's
// name) under a key of the cluster, is refused with *fence.ForgedTokenError
// before any SQL runs. Without a key set any number is compared: a made-up
// 2^53-1 would poison the resource (Above and Lower, and `fence guard
// repair`, undo that). See docs/guards.md.
//
// # Tables
//
// The package-level functions use the tables fence_guard and fence_ops.
// New(Options{Table, OpsTable}) makes a Guard for other names (plain
// identifiers, optionally schema-qualified). MaxToken reports the largest
// token the guard table has accepted: the floor a restore of the Fence server
// must stay above, so tokens never go back below what the database has seen
// (`fence guard max-token --postgres DSN` prints it; `fence restore
// --floor-from postgres://…` reads it itself).
//
// Migrate (or Guard.Migrate, or the statements of Guard.DDL in your own
// migration tool) must have created the tables before the first Check or
// Do: a guard used without them returns an error that names the missing
// table and says to call Migrate, wrapping PostgreSQL's own (SQLSTATE 42P01).
//
// Interfaces: Check takes a Tx, which pgx.Tx satisfies and *pgxpool.Pool
// and *pgx.Conn do not (a pool would commit the token apart from the write);
// Querier and Execer (MaxToken, Column.CheckRows, Prune) are satisfied by
// pgx.Tx, *pgx.Conn and *pgxpool.Pool; Beginner by *pgxpool.Pool and
// *pgx.Conn. Every refusal is a
// typed error from package fence, usable with errors.Is and errors.As;
// invalid input (token 0, empty resource, bad table name) is an
// *fence.InvalidError naming the field and the bound.
package postgres
