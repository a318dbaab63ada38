package postgres_test

import (
	"reflect"
	"testing"

	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Check must be given the caller's transaction: a pool (or a bare
// connection) would commit the token advance on its own, apart from the
// caller's write. The parameter type refuses both at compile time.
func TestCheckTakesATransactionNotAPool(t *testing.T) {
	for name, fn := range map[string]any{
		"postgres.Check": postgres.Check,
		"(*Guard).Check": (*postgres.Guard).Check,
	} {
		ft := reflect.TypeOf(fn)
		param := ft.In(1)
		if name == "(*Guard).Check" {
			param = ft.In(2) // receiver first
		}
		for _, notTx := range []reflect.Type{reflect.TypeOf((*pgxpool.Pool)(nil)), reflect.TypeOf((*pgx.Conn)(nil)), reflect.TypeOf((*pgxpool.Conn)(nil))} {
			if notTx.AssignableTo(param) {
				t.Errorf("%s accepts a %v: the token would commit separately from the write", name, notTx)
			}
		}
		if tx := reflect.TypeOf((*pgx.Tx)(nil)).Elem(); !tx.AssignableTo(param) {
			t.Errorf("%s does not accept a pgx.Tx", name)
		}
	}
}
