// Package mysql makes a MySQL or MariaDB (InnoDB) database refuse writes
// from a lock owner that is no longer current: the fencing-token check at
// the side effect, in the same transaction as the write. It has the
// contract and API of package guard/postgres, on database/sql with
// github.com/go-sql-driver/mysql (import the package as mysqlguard next to
// the driver).
//
// A worker whose lease expired while it was paused does not know it; when it
// wakes it writes anyway. Checking the token beforehand in a separate request
// does not help — another owner can intervene between the read and the
// write. The check must be one atomic step with the write. Check does that
// with one statement in the caller's own transaction:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	defer tx.Rollback()
//	if err := mysqlguard.Check(ctx, tx, "sku-42", lease.Token()); err != nil {
//		return err // *fence.StaleTokenError: a newer owner has written
//	}
//	tx.ExecContext(ctx, `UPDATE stock SET qty = ? WHERE sku = ?`, 8, "sku-42")
//	return tx.Commit()
//
// # Why the statement is atomic, under REPEATABLE READ and READ COMMITTED
//
// Check runs
//
//	INSERT INTO fence_guard (resource, last_token, updated_at) VALUES (?, ?, UTC_TIMESTAMP(6))
//	ON DUPLICATE KEY UPDATE
//		updated_at = IF(last_token <= ?, UTC_TIMESTAMP(6), updated_at),
//		last_token = IF(last_token <= ?, ?, last_token)
//
// The compare (last_token <= token) is inside the statement that writes, so
// there is no moment between reading the last token and advancing it. On a
// duplicate key InnoDB puts an exclusive lock on the existing row (a new row
// is locked by its insert) and evaluates the UPDATE part on the row's latest
// committed version — a "current read", which InnoDB uses for every
// UPDATE, DELETE, INSERT and locking SELECT whatever the isolation level;
// the transaction's REPEATABLE READ snapshot is used only by plain SELECTs.
// A concurrent writer of the same resource waits for that lock until this
// transaction ends, then compares with what this one committed. So the
// writers of one resource are serialised in the order they take the row
// lock, and a token is accepted only if no newer one has committed before
// it.
//
// The outcome is not taken from the affected-rows count alone. The
// statement reports 1 for an insert, 2 for a changed row and 0 for a row
// left as it was — but 1 for a row left as it was too if the connection was
// opened with clientFoundRows=true, which Check cannot see. So 2 (changed:
// only the accepting branch changes the row) is taken as accepted, and in
// every other case Check reads the row with SELECT last_token … FOR UPDATE,
// a locking read of the row this transaction now holds: equal to the token
// means accepted, greater means refused, with both numbers in the
// *fence.StaleTokenError. updated_at is assigned before last_token so that
// both IFs compare the old last_token whether assignments run left to right
// (MySQL) or simultaneously (MariaDB's SIMULTANEOUS_ASSIGNMENT mode).
//
// What is not atomic: reading last_token with a plain SELECT and writing it
// with a second statement. Under REPEATABLE READ the SELECT reads the
// snapshot, which may predate a newer owner's commit; under READ COMMITTED
// a newer owner can commit between the two statements. SELECT … FOR UPDATE
// followed by an UPDATE is atomic (the locking read takes the row lock and
// reads the latest version) but needs a row to exist and two round trips.
// TestAtomicUnderIsolation runs all three under both levels in the two
// interleavings that matter and shows the plain read letting a stale write
// through while the other two never do; the shared 32-writer history test
// runs at both levels too.
//
// Isolation notes. Check never fails spuriously under READ COMMITTED or
// REPEATABLE READ with MySQL's and MariaDB's default settings. With MariaDB's
// innodb_snapshot_isolation=ON (the default from MariaDB 11.8) a REPEATABLE
// READ transaction that read the guard row before a newer token committed
// gets error 1020 from Check instead; IsRetryable reports it (and deadlocks,
// 1213, and lock wait timeouts, 1205): roll back and run the transaction
// again. SERIALIZABLE works like REPEATABLE READ with plain reads turned
// into shared locks. The guard tables must be InnoDB; Migrate creates them
// so and refuses existing tables in another engine.
//
// # Three ways to use it
//
//   - Check in your transaction, as above: the guard table holds the token.
//   - The column pattern: keep the token in your own row and let the UPDATE
//     compare it (UPDATE stock SET qty = ?, fence_token = ? WHERE sku = ?
//     AND fence_token <= ?); Column.CheckRows says why 0 rows changed.
//   - Do: an idempotent operation. Check, look up its op_id, call your
//     function, save its result — one READ COMMITTED transaction. A retry
//     with the same op_id returns the saved result without applying again,
//     even after a newer token took over; the same op_id with a different
//     payload is refused with *fence.OpConflictError. CheckOp and SaveOp are
//     Do split in two, in your own transaction.
//
// # Retention of op records
//
// An op record is kept at least Options.Retention (default 24h), counted
// from when it was saved (UTC_TIMESTAMP(6) of the saving statement). One Do
// call in Options.PruneEvery (default 1000) also deletes its own resource's
// records older than that, inside its transaction; Prune deletes old records
// of every resource in batches and is meant for a periodic job. A retry
// whose record has been removed is applied again as a new op, and its token
// is still checked.
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
// The package-level functions use the tables fence_guard and fence_ops in
// the connection's database. New(Options{Table, OpsTable}) makes a Guard for
// other names (plain identifiers, optionally qualified by a database).
// Resources and op_ids are stored as VARBINARY and compared byte for byte,
// as Fence compares them. MaxToken and MaxTokenFound report the largest
// token the guard table has accepted: the floor a restore of the Fence
// server must stay above (`fence guard max-token --mysql DSN`, `fence
// restore --floor-from mysql://…`; MaxTokenAt and ParseDSN serve both).
// Migrate must have created the tables before the first Check or Do: a guard
// used without them returns an error that names the missing table and says
// to call Migrate, wrapping the server's error 1146.
//
// Interfaces: Check, CheckOp and SaveOp take a *sql.Tx (on a *sql.DB the
// token would commit apart from the write); Querier and Execer (MaxToken,
// Column.CheckRows, Prune) are satisfied by *sql.Tx, *sql.DB and *sql.Conn;
// Beginner (Do) by *sql.DB and *sql.Conn. Every refusal is a typed error
// from package fence, usable with errors.Is and errors.As; invalid input
// (token 0, empty resource, bad table name) is an *fence.InvalidError
// naming the field and the bound.
package mysql
