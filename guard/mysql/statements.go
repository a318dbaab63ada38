package mysql

import (
	"fmt"
)

// nowSQL is the current time as updated_at and created_at store it: UTC,
// whatever the session's time_zone, to the microsecond, at the statement
// (MySQL's NOW() is the statement's start, not the transaction's).
const nowSQL = `UTC_TIMESTAMP(6)`

// pruneBatch bounds how many op records one statement of Prune deletes, so
// that each statement holds its locks briefly.
const pruneBatch = 1000

// statements is the SQL of one Guard, built once from its table names.
type statements struct {
	migrate  []string
	check    string // the one statement that compares and advances
	last     string // the current token, by a locking read, to tell the outcome
	lookupOp string
	saveOp   string
	pruneOne string // one resource's old op records; ?2 is an age in µs
	pruneAll string // ?1 is an age in µs; at most pruneBatch rows
	maxToken string
	engine   string // the storage engine of a table, to refuse a non-transactional one
}

func newStatements(table, ops, opsIndex string) statements {
	return statements{
		migrate: []string{
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
				") ENGINE=InnoDB", ops, opsIndex),
		},
		// updated_at is assigned before last_token so that its IF reads the
		// old last_token under MySQL's left-to-right assignment as well as
		// under MariaDB's SIMULTANEOUS_ASSIGNMENT mode; last_token's own IF
		// reads the old value in both.
		check: fmt.Sprintf(`INSERT INTO %s (resource, last_token, updated_at) VALUES (?, ?, %s)
ON DUPLICATE KEY UPDATE
	updated_at = IF(last_token <= ?, %s, updated_at),
	last_token = IF(last_token <= ?, ?, last_token)`, table, nowSQL, nowSQL),
		last:     fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = ? FOR UPDATE`, table),
		lookupOp: fmt.Sprintf(`SELECT payload_hash, result FROM %s WHERE resource = ? AND op_id = ?`, ops),
		saveOp: fmt.Sprintf(`INSERT INTO %s (resource, op_id, payload_hash, result, token, created_at)
VALUES (?, ?, ?, ?, ?, %s)`, ops, nowSQL),
		pruneOne: fmt.Sprintf(`DELETE FROM %s WHERE resource = ? AND created_at < %s - INTERVAL ? MICROSECOND`, ops, nowSQL),
		pruneAll: fmt.Sprintf(`DELETE FROM %s WHERE created_at < %s - INTERVAL ? MICROSECOND ORDER BY created_at LIMIT %d`, ops, nowSQL, pruneBatch),
		maxToken: fmt.Sprintf(`SELECT MAX(last_token) FROM %s`, table),
		engine:   `SELECT engine FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`,
	}
}
