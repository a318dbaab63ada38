package sqlite

import (
	"context"
	"fmt"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// Migrate creates the guard table and the op table of the default Guard if
// they do not exist. See Guard.Migrate.
func Migrate(ctx context.Context, db Beginner) error { return defaultGuard.Migrate(ctx, db) }

// Migrate creates g's guard table, its op table and the op table's
// created_at index if they do not exist, in one transaction. It is
// idempotent. The DDL, for the default names:
//
//	CREATE TABLE IF NOT EXISTS "fence_guard" (
//		resource   TEXT    PRIMARY KEY,
//		last_token INTEGER NOT NULL,
//		updated_at TEXT
//	);
//	CREATE TABLE IF NOT EXISTS "fence_ops" (
//		resource     TEXT    NOT NULL,
//		op_id        TEXT    NOT NULL,
//		payload_hash BLOB    NOT NULL,
//		result       BLOB,
//		token        INTEGER NOT NULL,
//		created_at   TEXT    NOT NULL,
//		PRIMARY KEY (resource, op_id)
//	);
//	CREATE INDEX IF NOT EXISTS "fence_ops_created_at_idx" ON "fence_ops" (created_at);
func (g *Guard) Migrate(ctx context.Context, db Beginner) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("guard/sqlite: migrate: %w", err)
	}
	defer tx.Rollback()
	if err := g.e.Migrate(ctx, sqlguard.NewSQLTx(tx)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("guard/sqlite: migrate: %w", err)
	}
	return nil
}

// DDL returns the statements Migrate runs, for users who apply schema
// changes with their own migration tool.
func (g *Guard) DDL() []string { return g.e.DDL() }
