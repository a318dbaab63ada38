package postgres

import (
	"fmt"
)

// statements is the SQL of one Guard, built once from its table names.
type statements struct {
	migrate  []string
	check    string // the one statement that compares and advances
	last     string // the current token, to fill a refusal's facts
	lookupOp string
	saveOp   string
	pruneOne string // one resource's old op records
	pruneAll string
	maxToken string
}

func newStatements(table, ops, opsIndex string) statements {
	return statements{
		migrate: []string{
			fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	resource   text        PRIMARY KEY,
	last_token bigint      NOT NULL,
	updated_at timestamptz
)`, table),
			fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	resource     text        NOT NULL,
	op_id        text        NOT NULL,
	payload_hash bytea       NOT NULL,
	result       bytea,
	token        bigint      NOT NULL,
	created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
	PRIMARY KEY (resource, op_id)
)`, ops),
			fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON %s (created_at)`, opsIndex, ops),
		},
		check: fmt.Sprintf(`INSERT INTO %s AS g (resource, last_token, updated_at) VALUES ($1, $2, now())
ON CONFLICT (resource) DO UPDATE SET last_token = EXCLUDED.last_token, updated_at = now()
WHERE g.last_token <= EXCLUDED.last_token
RETURNING last_token`, table),
		last:     fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = $1`, table),
		lookupOp: fmt.Sprintf(`SELECT payload_hash, result FROM %s WHERE resource = $1 AND op_id = $2`, ops),
		saveOp: fmt.Sprintf(`INSERT INTO %s (resource, op_id, payload_hash, result, token, created_at)
VALUES ($1, $2, $3, $4, $5, clock_timestamp())`, ops),
		pruneOne: fmt.Sprintf(`DELETE FROM %[1]s WHERE (resource, op_id) IN (
	SELECT resource, op_id FROM %[1]s
	WHERE resource = $1 AND created_at < now() - $2::float8 * interval '1 second'
	FOR UPDATE SKIP LOCKED)`, ops),
		pruneAll: fmt.Sprintf(`DELETE FROM %[1]s WHERE (resource, op_id) IN (
	SELECT resource, op_id FROM %[1]s
	WHERE created_at < now() - $1::float8 * interval '1 second'
	FOR UPDATE SKIP LOCKED)`, ops),
		maxToken: fmt.Sprintf(`SELECT coalesce(max(last_token), 0) FROM %s`, table),
	}
}
