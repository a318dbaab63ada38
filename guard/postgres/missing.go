package postgres

import (
	"errors"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
	"github.com/jackc/pgx/v5/pgconn"
)

// noTable turns PostgreSQL's undefined_table error (SQLSTATE 42P01,
// `relation "fence_guard" does not exist`) on one of g's tables into an
// error that names the table and says to call Migrate; the PgError stays
// wrapped. Any other error, or a missing table of the caller's own, is
// returned as is.
func (g *Guard) noTable(err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "42P01" {
		return err
	}
	return sqlguard.MissingTable("guard/postgres", err, pg.Message, g.tableName, g.opsName)
}
