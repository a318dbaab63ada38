// Package sqlite makes an SQLite database (modernc.org/sqlite, no cgo)
// refuse writes from a lock owner that is no longer current: the
// fencing-token check at the side effect, in the same transaction as the
// write. It has the same contract as package guard/postgres, for embedded
// use.
//
// Open the database with a busy timeout and WAL, and let transactions take
// the write lock at BEGIN:
//
//	db, _ := sql.Open("sqlite", "file:app.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
//
// Then, in your transaction:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	defer tx.Rollback()
//	if err := sqlite.Check(ctx, tx, "sku-42", lease.Token()); err != nil {
//		return err // *fence.StaleTokenError: a newer owner has written
//	}
//	tx.ExecContext(ctx, `UPDATE stock SET qty = ?1 WHERE sku = ?2`, 8, "sku-42")
//	return tx.Commit()
//
// Check runs one statement (INSERT … ON CONFLICT (resource) DO UPDATE …
// WHERE last_token <= excluded.last_token RETURNING last_token): no row
// returned means the token is older than the last one accepted, and the
// refusal carries both numbers. An equal token is accepted. SQLite runs one
// writing transaction at a time, so the check and the write commit together
// with nothing in between.
//
// # Three ways to use it
//
//   - Check in your transaction, as above: the guard table holds the token.
//   - The column pattern: keep the token in your own row and let the UPDATE
//     compare it (UPDATE stock SET qty = ?1, fence_token = ?2 WHERE sku = ?3
//     AND fence_token <= ?2); Column.CheckRows says why 0 rows changed.
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
// An op record is kept at least Options.Retention (default 24h). One Do
// call in Options.PruneEvery (default 1000) also deletes its own resource's
// records older than that, inside its transaction; Prune deletes old records
// of every resource. A retry whose record has been removed is applied again
// as a new op, and its token is still checked. Times are UTC text with
// milliseconds, from the local clock.
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
// The package-level functions use the tables fence_guard and fence_ops;
// New(Options{Table, OpsTable}) makes a Guard for other names. MaxToken
// reports the largest token the guard table has accepted: the floor a
// restore of the Fence server must stay above (`fence guard max-token
// --sqlite PATH`; `fence restore --floor-from sqlite:PATH` reads it itself).
// Migrate must have created the tables before the first Check or Do: a guard
// used without them returns an error that names the missing table and says
// to call Migrate, wrapping SQLite's "no such table".
//
// Interfaces: Check takes a *sql.Tx (on a *sql.DB it would commit the token
// apart from the write); Querier and Execer (MaxToken, Column.CheckRows,
// Prune) are satisfied by *sql.Tx, *sql.DB and *sql.Conn; Beginner by
// *sql.DB and *sql.Conn. Every refusal is a typed
// error from package fence, usable with errors.Is and errors.As.
package sqlite
