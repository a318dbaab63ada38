package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
	"github.com/go-sql-driver/mysql"
)

// nowSQL is the current time as updated_at and created_at store it: UTC,
// whatever the session's time_zone, to the microsecond, at the statement
// (MySQL's NOW() is the statement's start, not the transaction's).
const nowSQL = `UTC_TIMESTAMP(6)`

// pruneBatch bounds how many op records one statement of Prune deletes, so
// that each statement holds its locks briefly.
const pruneBatch = 1000

// dialect is MySQL's and MariaDB's part of the SQL guard engine: no
// RETURNING (Check reads the outcome back), ? placeholders, backquoted
// names, ages in microseconds, batched pruning, and errors 1146 and 1062.
var dialect = sqlguard.Dialect{
	Pkg:         "guard/mysql",
	Statements:  statements,
	Quote:       quote,
	Age:         func(d time.Duration) any { return d.Microseconds() },
	ReadBack:    true,
	PruneBatch:  pruneBatch,
	Placeholder: func(int) string { return "?" },
	// LOCK IN SHARE MODE: a locking read sees the row's latest version under
	// REPEATABLE READ too; MySQL 5.7 and every MariaDB accept it (FOR SHARE
	// is MySQL 8 only).
	ColumnLock: " LOCK IN SHARE MODE",
	NoSuchTable: func(err error) (string, bool) {
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != errNoSuchTable {
			return "", false
		}
		return me.Message, true
	},
	Duplicate:  isDupEntry,
	ErrOpSaved: ErrOpSaved,
}

func statements(t sqlguard.Tables) sqlguard.Statements {
	table, ops := quote(t.Table), quote(t.Ops)
	return sqlguard.Statements{
		Migrate: []string{
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
				"\tresource   VARBINARY(512) NOT NULL,\n"+
				"\tlast_token BIGINT         NOT NULL,\n"+
				"\tupdated_at DATETIME(6)    NULL,\n"+
				"\tPRIMARY KEY (resource)\n"+
				") ENGINE=InnoDB", table),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
				"\tresource     VARBINARY(512) NOT NULL,\n"+
				"\top_id        VARBINARY(256) NOT NULL,\n"+
				"\tpayload_hash BINARY(32)     NOT NULL,\n"+
				"\tresult       LONGBLOB       NULL,\n"+
				"\ttoken        BIGINT         NOT NULL,\n"+
				"\tcreated_at   DATETIME(6)    NOT NULL,\n"+
				"\tPRIMARY KEY (resource, op_id),\n"+
				"\tKEY %s (created_at)\n"+
				") ENGINE=InnoDB", ops, quote([]string{t.OpsIndex})),
		},
		// updated_at is assigned before last_token so that its IF reads the
		// old last_token under MySQL's left-to-right assignment as well as
		// under MariaDB's SIMULTANEOUS_ASSIGNMENT mode; last_token's own IF
		// reads the old value in both.
		Check: fmt.Sprintf(`INSERT INTO %s (resource, last_token, updated_at) VALUES (?, ?, %s)
ON DUPLICATE KEY UPDATE
	updated_at = IF(last_token <= ?, %s, updated_at),
	last_token = IF(last_token <= ?, ?, last_token)`, table, nowSQL, nowSQL),
		Last:     fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = ? FOR UPDATE`, table),
		LookupOp: fmt.Sprintf(`SELECT payload_hash, result FROM %s WHERE resource = ? AND op_id = ?`, ops),
		SaveOp: fmt.Sprintf(`INSERT INTO %s (resource, op_id, payload_hash, result, token, created_at)
VALUES (?, ?, ?, ?, ?, %s)`, ops, nowSQL),
		PruneOne: fmt.Sprintf(`DELETE FROM %s WHERE resource = ? AND created_at < %s - INTERVAL ? MICROSECOND`, ops, nowSQL),
		PruneAll: fmt.Sprintf(`DELETE FROM %s WHERE created_at < %s - INTERVAL ? MICROSECOND ORDER BY created_at LIMIT %d`, ops, nowSQL, pruneBatch),
		MaxToken: fmt.Sprintf(`SELECT MAX(last_token) FROM %s`, table),
	}
}

// quote joins identifier parts checked by sqlguard.ParseIdent into a
// backquoted MySQL name. The parts are plain identifiers ([A-Za-z_][A-Za-z0-9_]*),
// so no escaping is needed, and backquotes work whatever the sql_mode
// (double quotes would need ANSI_QUOTES).
func quote(parts []string) string {
	q := make([]string, len(parts))
	for i, p := range parts {
		q[i] = "`" + p + "`"
	}
	return strings.Join(q, ".")
}

// begin starts Do's transactions at READ COMMITTED.
func begin(ctx context.Context, db Beginner) sqlguard.Begin {
	return sqlguard.BeginSQL(ctx, db, func(readOnly bool) *sql.TxOptions {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted, ReadOnly: readOnly}
	})
}
