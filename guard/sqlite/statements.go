package sqlite

import (
	"fmt"
	"time"
)

// nowSQL is the current time as created_at and updated_at store it: UTC
// text with milliseconds, which sorts as it compares.
const nowSQL = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`

// statements is the SQL of one Guard, built once from its table names.
type statements struct {
	migrate  []string
	check    string // the one statement that compares and advances
	last     string // the current token, to fill a refusal's facts
	lookupOp string
	saveOp   string
	pruneOne string // one resource's old op records; ?2 is an age modifier
	pruneAll string // ?1 is an age modifier ("-3600.000 seconds")
	maxToken string
}

func newStatements(table, ops, opsIndex, opsBare string) statements {
	return statements{
		migrate: []string{
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
			fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON %s (created_at)`, opsIndex, opsBare),
		},
		check: fmt.Sprintf(`INSERT INTO %s AS g (resource, last_token, updated_at) VALUES (?1, ?2, %s)
ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token, updated_at = excluded.updated_at
WHERE g.last_token <= excluded.last_token
RETURNING last_token`, table, nowSQL),
		last:     fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = ?1`, table),
		lookupOp: fmt.Sprintf(`SELECT payload_hash, result FROM %s WHERE resource = ?1 AND op_id = ?2`, ops),
		saveOp: fmt.Sprintf(`INSERT INTO %s (resource, op_id, payload_hash, result, token, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, %s)`, ops, nowSQL),
		pruneOne: fmt.Sprintf(`DELETE FROM %s WHERE resource = ?1 AND created_at < strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now', ?2)`, ops),
		pruneAll: fmt.Sprintf(`DELETE FROM %s WHERE created_at < strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now', ?1)`, ops),
		maxToken: fmt.Sprintf(`SELECT coalesce(max(last_token), 0) FROM %s`, table),
	}
}

// ageModifier is the SQLite date modifier that goes back d.
func ageModifier(d time.Duration) string { return fmt.Sprintf("-%.3f seconds", d.Seconds()) }
