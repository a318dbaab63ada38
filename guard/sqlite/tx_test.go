package sqlite_test

import (
	"database/sql"
	"reflect"
	"testing"

	"github.com/fenceworks/fence/guard/sqlite"
)

// Check must be given the caller's transaction: on a *sql.DB or *sql.Conn
// the token advance would commit by itself, apart from the caller's write.
func TestCheckTakesATransaction(t *testing.T) {
	for name, param := range map[string]reflect.Type{
		"sqlite.Check":   reflect.TypeOf(sqlite.Check).In(1),
		"(*Guard).Check": reflect.TypeOf((*sqlite.Guard).Check).In(2),
	} {
		for _, notTx := range []reflect.Type{reflect.TypeOf((*sql.DB)(nil)), reflect.TypeOf((*sql.Conn)(nil))} {
			if notTx.AssignableTo(param) {
				t.Errorf("%s accepts a %v: the token would commit separately from the write", name, notTx)
			}
		}
		if !reflect.TypeOf((*sql.Tx)(nil)).AssignableTo(param) {
			t.Errorf("%s does not accept a *sql.Tx", name)
		}
	}
}
