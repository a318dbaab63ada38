package sqlite

import (
	"strings"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// noTable turns SQLite's "no such table: fence_guard" on one of g's tables
// into an error that names the table and says to call Migrate; the driver's
// error stays wrapped. Any other error, or a missing table of the caller's
// own, is returned as is. SQLite reports it as a plain SQLITE_ERROR (1), so
// the message is what tells it apart (modernc.org/sqlite and mattn's
// go-sqlite3 both say "no such table: NAME").
func (g *Guard) noTable(err error) error {
	if err == nil {
		return nil
	}
	const prefix = "no such table: "
	msg := err.Error()
	i := strings.Index(msg, prefix)
	if i < 0 {
		return err
	}
	return sqlguard.MissingTable("guard/sqlite", err, msg[i+len(prefix):], g.tableName, g.opsName)
}
