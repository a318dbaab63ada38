package mysql

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// MySQL and MariaDB error numbers the guard tells apart.
const (
	errNoSuchTable     = 1146 // ER_NO_SUCH_TABLE: "Table 'test.fence_guard' doesn't exist"
	errDupEntry        = 1062 // ER_DUP_ENTRY
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT: the statement was rolled back
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK: the whole transaction was rolled back
	errCheckRead       = 1020 // ER_CHECKREAD: "record has changed since last read" (MariaDB innodb_snapshot_isolation)
)

// IsRetryable reports whether err (from Check, CheckOp, SaveOp, Do or the
// caller's own statements) is a transient conflict after which the same
// transaction may simply be run again: a deadlock (1213, InnoDB rolled the
// transaction back), a lock wait timeout (1205, only the statement was
// rolled back: roll back the rest yourself), or MariaDB's "record has
// changed since last read" (1020, under REPEATABLE READ with
// innodb_snapshot_isolation=ON, the default from MariaDB 11.8), or
// ErrOpSaved from SaveOp. Nothing of a rolled-back transaction was applied.
func IsRetryable(err error) bool {
	if errors.Is(err, ErrOpSaved) {
		return true
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errDeadlock, errLockWaitTimeout, errCheckRead:
		return true
	}
	return false
}

func isDupEntry(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDupEntry
}
