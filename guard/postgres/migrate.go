package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrateLockKey is the advisory lock that serialises concurrent Migrate
// calls (CREATE TABLE IF NOT EXISTS alone can race in PostgreSQL).
const migrateLockKey = 0x66656e6365 // "fence"

// Migrate creates the guard table and the op table of the default Guard if
// they do not exist. See Guard.Migrate.
func Migrate(ctx context.Context, db Beginner) error { return defaultGuard.Migrate(ctx, db) }

// Migrate creates g's guard table, its op table and the op table's
// created_at index if they do not exist, in one transaction. It is
// idempotent and safe to run from several processes at once. The DDL, for
// the default names:
//
//	CREATE TABLE IF NOT EXISTS "fence_guard" (
//		resource   text        PRIMARY KEY,
//		last_token bigint      NOT NULL,
//		updated_at timestamptz
//	);
//	CREATE TABLE IF NOT EXISTS "fence_ops" (
//		resource     text        NOT NULL,
//		op_id        text        NOT NULL,
//		payload_hash bytea       NOT NULL,
//		result       bytea,
//		token        bigint      NOT NULL,
//		created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
//		PRIMARY KEY (resource, op_id)
//	);
//	CREATE INDEX IF NOT EXISTS "fence_ops_created_at_idx" ON "fence_ops" (created_at);
func (g *Guard) Migrate(ctx context.Context, db Beginner) error {
	return pgx.BeginTxFunc(ctx, db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
			return fmt.Errorf("guard/postgres: migrate: %w", err)
		}
		return g.e.Migrate(ctx, querier{tx, tx})
	})
}

// DDL returns the statements Migrate runs, for users who apply schema
// changes with their own migration tool.
func (g *Guard) DDL() []string { return g.e.DDL() }
