package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// dialect is PostgreSQL's part of the SQL guard engine: INSERT … ON
// CONFLICT … RETURNING, $n placeholders, ages in seconds, and SQLSTATE
// 42P01 (undefined_table) and 23505 (unique_violation).
var dialect = sqlguard.Dialect{
	Pkg:         "guard/postgres",
	Statements:  statements,
	Quote:       sqlguard.Quote,
	Age:         func(d time.Duration) any { return d.Seconds() },
	Validate:    validateText,
	Placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
	NoSuchTable: func(err error) (string, bool) {
		var pg *pgconn.PgError
		if !errors.As(err, &pg) || pg.Code != "42P01" {
			return "", false
		}
		return pg.Message, true
	},
	Duplicate: func(err error) bool {
		var pg *pgconn.PgError
		return errors.As(err, &pg) && pg.Code == "23505"
	},
}

func statements(t sqlguard.Tables) sqlguard.Statements {
	table, ops := sqlguard.Quote(t.Table), sqlguard.Quote(t.Ops)
	return sqlguard.Statements{
		Migrate: []string{
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
			fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON %s (created_at)`, sqlguard.Quote([]string{t.OpsIndex}), ops),
		},
		Check: fmt.Sprintf(`INSERT INTO %s AS g (resource, last_token, updated_at) VALUES ($1, $2, now())
ON CONFLICT (resource) DO UPDATE SET last_token = EXCLUDED.last_token, updated_at = now()
WHERE g.last_token <= EXCLUDED.last_token
RETURNING last_token`, table),
		Last:     fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = $1`, table),
		LookupOp: fmt.Sprintf(`SELECT payload_hash, result FROM %s WHERE resource = $1 AND op_id = $2`, ops),
		SaveOp: fmt.Sprintf(`INSERT INTO %s (resource, op_id, payload_hash, result, token, created_at)
VALUES ($1, $2, $3, $4, $5, clock_timestamp())`, ops),
		PruneOne: fmt.Sprintf(`DELETE FROM %[1]s WHERE (resource, op_id) IN (
	SELECT resource, op_id FROM %[1]s
	WHERE resource = $1 AND created_at < now() - $2::float8 * interval '1 second'
	FOR UPDATE SKIP LOCKED)`, ops),
		PruneAll: fmt.Sprintf(`DELETE FROM %[1]s WHERE (resource, op_id) IN (
	SELECT resource, op_id FROM %[1]s
	WHERE created_at < now() - $1::float8 * interval '1 second'
	FOR UPDATE SKIP LOCKED)`, ops),
		MaxToken: fmt.Sprintf(`SELECT max(last_token) FROM %s`, table),
	}
}

// validateText refuses what a PostgreSQL text column cannot store: a NUL
// byte in the resource, and a NUL byte or invalid UTF-8 in the op_id.
// Without it the statement fails with SQLSTATE 22021, an untyped error that
// names no field and aborts the caller's transaction.
func validateText(resource, opID string) error {
	if strings.IndexByte(resource, 0) >= 0 {
		return fence.Invalid("resource", "free of NUL bytes", "")
	}
	if strings.IndexByte(opID, 0) >= 0 || !utf8.ValidString(opID) {
		return fence.Invalid("op_id", "valid UTF-8 free of NUL bytes", "")
	}
	return nil
}

// querier adapts pgx's methods to the engine's Querier; r or x may be nil
// when the caller passed only one (the other is then never called).
type querier struct {
	r Querier
	x Execer
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) sqlguard.Row {
	return q.r.QueryRow(ctx, sql, args...)
}

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.x.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// engineTx is a pgx.Tx as the engine's Tx.
type engineTx struct {
	querier
	tx pgx.Tx
}

func newTx(tx pgx.Tx) engineTx                        { return engineTx{querier{tx, tx}, tx} }
func (t engineTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t engineTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
