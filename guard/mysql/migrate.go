package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// DB runs statements outside a transaction of the guard's making: *sql.DB
// and *sql.Conn satisfy it (and *sql.Tx, but MySQL commits implicitly
// around DDL).
type DB interface {
	Querier
	Execer
}

// Migrate creates the guard table and the op table of the default Guard if
// they do not exist. See Guard.Migrate.
func Migrate(ctx context.Context, db DB) error { return defaultGuard.Migrate(ctx, db) }

// Migrate creates g's guard table and op table (with its created_at index)
// if they do not exist, then checks that both are InnoDB: the guard needs
// transactions and row locks, and a MyISAM or MEMORY table would accept the
// statements and guard nothing, so any other engine is refused with an
// error naming the table and its engine. It is idempotent and safe to run
// from several processes at once (CREATE TABLE IF NOT EXISTS is atomic in
// MySQL). DDL commits implicitly in MySQL, so Migrate runs no transaction
// of its own. The DDL, for the default names:
//
//	CREATE TABLE IF NOT EXISTS `fence_guard` (
//		resource   VARBINARY(512) NOT NULL,
//		last_token BIGINT         NOT NULL,
//		updated_at DATETIME(6)    NULL,
//		PRIMARY KEY (resource)
//	) ENGINE=InnoDB;
//	CREATE TABLE IF NOT EXISTS `fence_ops` (
//		resource     VARBINARY(512) NOT NULL,
//		op_id        VARBINARY(256) NOT NULL,
//		payload_hash BINARY(32)     NOT NULL,
//		result       LONGBLOB       NULL,
//		token        BIGINT         NOT NULL,
//		created_at   DATETIME(6)    NOT NULL,
//		PRIMARY KEY (resource, op_id),
//		KEY `fence_ops_created_at_idx` (created_at)
//	) ENGINE=InnoDB;
//
// Resources and op_ids are VARBINARY: compared byte for byte, as Fence
// compares them. A VARCHAR column's collation would make "SKU-1" and
// "sku-1" (or "a" and "a ", under PAD SPACE) one resource.
func (g *Guard) Migrate(ctx context.Context, db DB) error {
	for _, stmt := range g.sql.migrate {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("guard/mysql: migrate: %w", err)
		}
	}
	for _, t := range [][]string{g.table, g.ops} {
		if err := g.checkEngine(ctx, db, t); err != nil {
			return err
		}
	}
	return nil
}

func (g *Guard) checkEngine(ctx context.Context, db Querier, parts []string) error {
	var schema any // NULL: the connection's database
	name := parts[len(parts)-1]
	if len(parts) == 2 {
		schema = parts[0]
	}
	var engine sql.NullString
	err := db.QueryRowContext(ctx, g.sql.engine, schema, name).Scan(&engine)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("guard/mysql: migrate: table %s not found in information_schema after CREATE TABLE", joinParts(parts))
	case err != nil:
		return fmt.Errorf("guard/mysql: migrate: reading the engine of %s: %w", joinParts(parts), err)
	case !strings.EqualFold(engine.String, "InnoDB"):
		return fmt.Errorf("guard/mysql: migrate: table %s uses engine %q, want InnoDB (the guard needs transactions and row locks): ALTER TABLE %s ENGINE=InnoDB",
			joinParts(parts), engine.String, quote(parts))
	}
	return nil
}

// DDL returns the statements Migrate runs, for users who apply schema
// changes with their own migration tool.
func (g *Guard) DDL() []string { return append([]string(nil), g.sql.migrate...) }
