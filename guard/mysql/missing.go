package mysql

import (
	"errors"

	"github.com/fenceworks/fence/guard/internal/sqlguard"
	"github.com/go-sql-driver/mysql"
)

// errNoSuchTable is ER_NO_SUCH_TABLE: "Table 'test.fence_guard' doesn't exist".
const errNoSuchTable = 1146

// noTable turns MySQL's 1146 on one of g's tables into an error that names
// the table and says to call Migrate; the *mysql.MySQLError stays wrapped.
// Any other error, or a missing table of the caller's own, is returned as is.
func (g *Guard) noTable(err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != errNoSuchTable {
		return err
	}
	return sqlguard.MissingTable("guard/mysql", err, me.Message, g.TableName(), g.OpsTableName())
}
