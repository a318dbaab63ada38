package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// nowSQL is the current time as created_at and updated_at store it: UTC
// text with milliseconds, which sorts as it compares.
const nowSQL = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`

// dialect is SQLite's part of the SQL guard engine: INSERT … ON CONFLICT …
// RETURNING, ?n placeholders, ages as date modifiers, and "no such table".
var dialect = sqlguard.Dialect{
	Pkg:         "guard/sqlite",
	Statements:  statements,
	Quote:       sqlguard.Quote,
	Age:         ageModifier,
	Placeholder: func(n int) string { return fmt.Sprintf("?%d", n) },
	// SQLite reports a missing table as a plain SQLITE_ERROR (1), so the
	// message tells it apart (modernc.org/sqlite and mattn's go-sqlite3
	// both say "no such table: NAME").
	NoSuchTable: func(err error) (string, bool) {
		const prefix = "no such table: "
		msg := err.Error()
		i := strings.Index(msg, prefix)
		if i < 0 {
			return "", false
		}
		return msg[i+len(prefix):], true
	},
}

func statements(t sqlguard.Tables) sqlguard.Statements {
	table, ops := sqlguard.Quote(t.Table), sqlguard.Quote(t.Ops)
	// SQLite qualifies the index, not its table: "s"."t_idx" ON "t".
	index := sqlguard.Quote(append(append([]string(nil), t.Ops[:len(t.Ops)-1]...), t.OpsIndex))
	return sqlguard.Statements{
		Migrate: []string{
			fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	resource   TEXT    PRIMARY KEY,
	last_token INTEGER NOT NULL,
	updated_at TEXT
)`, table),
			fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	resource     TEXT    NOT NULL,
	op_id        TEXT    NOT NULL,
	payload_hash BLOB    NOT NULL,
	result       BLOB,
	token        INTEGER NOT NULL,
	created_at   TEXT    NOT NULL,
	PRIMARY KEY (resource, op_id)
)`, ops),
			fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON %s (created_at)`, index, sqlguard.Quote(t.Ops[len(t.Ops)-1:])),
		},
		Check: fmt.Sprintf(`INSERT INTO %s AS g (resource, last_token, updated_at) VALUES (?1, ?2, %s)
ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token, updated_at = excluded.updated_at
WHERE g.last_token <= excluded.last_token
RETURNING last_token`, table, nowSQL),
		Last:     fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = ?1`, table),
		LookupOp: fmt.Sprintf(`SELECT payload_hash, result FROM %s WHERE resource = ?1 AND op_id = ?2`, ops),
		SaveOp: fmt.Sprintf(`INSERT INTO %s (resource, op_id, payload_hash, result, token, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, %s)`, ops, nowSQL),
		PruneOne: fmt.Sprintf(`DELETE FROM %s WHERE resource = ?1 AND created_at < strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now', ?2)`, ops),
		PruneAll: fmt.Sprintf(`DELETE FROM %s WHERE created_at < strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now', ?1)`, ops),
		MaxToken: fmt.Sprintf(`SELECT max(CAST(last_token AS INTEGER)) FROM %s`, table), // a hand-made table may hold a number as TEXT, which max() would order above every integer
	}
}

// ageModifier is the SQLite date modifier that goes back d.
func ageModifier(d time.Duration) any { return fmt.Sprintf("-%.3f seconds", d.Seconds()) }

// begin starts Do's transaction (SQLite has one writer; the isolation level
// is the driver's default).
func begin(ctx context.Context, db Beginner) sqlguard.Begin {
	return sqlguard.BeginSQL(ctx, db, func(bool) *sql.TxOptions { return nil })
}
