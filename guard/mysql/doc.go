// Package mysql makes a MySQL or MariaDB (InnoDB) database refuse writes
// from a lock owner that is no longer current: the fencing-token check at
// the side effect, in the same transaction as the write. It has the same
// contract and API as package guard/postgres, on database/sql with
// github.com/go-sql-driver/mysql.
package mysql
