package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
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
	if err := g.e.Migrate(ctx, sqlguard.SQLQuerier{R: db, X: db}); err != nil {
		return err
	}
	t := g.e.Tables()
	for _, parts := range [][]string{t.Table, t.Ops} {
		if err := checkEngine(ctx, db, parts); err != nil {
			return err
		}
	}
	return nil
}

// engineSQL reads the storage engine of a table, to refuse a
// non-transactional one.
const engineSQL = `SELECT engine FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`

func checkEngine(ctx context.Context, db Querier, parts []string) error {
	var schema any // NULL: the connection's database
	name := parts[len(parts)-1]
	if len(parts) == 2 {
		schema = parts[0]
	}
	var engine sql.NullString
	err := db.QueryRowContext(ctx, engineSQL, schema, name).Scan(&engine)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("guard/mysql: migrate: table %s not found in information_schema after CREATE TABLE", strings.Join(parts, "."))
	case err != nil:
		return fmt.Errorf("guard/mysql: migrate: reading the engine of %s: %w", strings.Join(parts, "."), err)
	case !strings.EqualFold(engine.String, "InnoDB"):
		return fmt.Errorf("guard/mysql: migrate: table %s uses engine %q, want InnoDB (the guard needs transactions and row locks): ALTER TABLE %s ENGINE=InnoDB",
			strings.Join(parts, "."), engine.String, quote(parts))
	}
	return nil
}

// DDL returns the statements Migrate runs, for users who apply schema
// changes with their own migration tool.
func (g *Guard) DDL() []string { return g.e.DDL() }
