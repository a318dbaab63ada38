package sqlguard

import (
	"context"
	"time"
)

// Dialect is what one SQL database adds to the Engine: its statements, how
// it quotes names and passes ages, and how its driver's errors are told
// apart. The guards' facades (guard/postgres, guard/mysql, guard/sqlite)
// each declare one.
type Dialect struct {
	Pkg string // error prefix and the package Migrate is called from: "guard/postgres"
	// Statements builds the SQL of a guard from its resolved tables.
	Statements func(t Tables) Statements
	// Quote joins identifier parts checked by ParseIdent into a quoted name.
	Quote func(parts []string) string
	// Age is the bind value of a prune statement's age parameter.
	Age func(time.Duration) any
	// ReadBack: the database has no RETURNING for an upsert (MySQL).
	// Statements.Check then runs with Exec on (resource, token, token,
	// token, token); 2 affected rows means the row was advanced, and any
	// other count is decided by reading Statements.Last (a locking read):
	// equal to the token is accepted, greater refused.
	ReadBack bool
	// PruneBatch > 0: Statements.PruneAll deletes at most this many rows, and
	// Prune repeats it until a statement removes fewer.
	PruneBatch int
	// Validate, if set, refuses what the database's text columns cannot
	// store; opID is "" for a plain Check.
	Validate func(resource, opID string) error
	// NoSuchTable reports whether err says a table does not exist, and the
	// driver's message naming it.
	NoSuchTable func(err error) (msg string, ok bool)
	// Duplicate, if set, reports a primary-key violation: Do then replays
	// the op record that another transaction saved first.
	Duplicate func(err error) bool
	// ErrOpSaved, if set, is wrapped into SaveOp's error on a duplicate op
	// record (a retryable error of the dialect's package).
	ErrOpSaved error
	// ColumnLock is appended to the column pattern's read of a row's token
	// (" LOCK IN SHARE MODE" where a plain read could see an old snapshot).
	ColumnLock string
	// Placeholder is the bind parameter n (1-based): "$1", "?1", "?".
	Placeholder func(n int) string
}

// Statements is the SQL of one guard, built once from its table names. The
// bind parameters, in order: Check (resource, token) or, with ReadBack,
// (resource, token ×4); Last (resource); LookupOp (resource, op_id); SaveOp
// (resource, op_id, payload hash, result, token); PruneOne (resource, age);
// PruneAll (age); MaxToken none (NULL on an empty table).
type Statements struct {
	Migrate  []string
	Check    string // the one statement that compares and advances
	Last     string // the current token, to fill a refusal's facts (or decide, with ReadBack)
	LookupOp string
	SaveOp   string
	PruneOne string // one resource's old op records
	PruneAll string
	MaxToken string
}

// Row is one result row of Querier.QueryRow. A query without a row makes
// Scan return an error matching database/sql's ErrNoRows (pgx's does).
type Row interface {
	Scan(dest ...any) error
}

// Querier runs statements over a transaction or a connection: the one
// interface the Engine needs of a driver. Exec returns the rows affected.
type Querier interface {
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Tx is a Querier in a transaction the Engine began (Do).
type Tx interface {
	Querier
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Begin starts a transaction for Do at the dialect's isolation level;
// readOnly asks for a read-only one.
type Begin func(readOnly bool) (Tx, error)
