package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/fenceworks/fence/guard/mysql"
)

// benchOpSeq makes every Do of every benchmark run a new op (a repeated
// op_id would be a cheap replay).
var benchOpSeq atomic.Int64

// BenchmarkGuardedTx compares, in one process, the same stock update as a
// plain transaction, guarded by Check, in the column pattern, and through
// Do, and logs each cost relative to the plain transaction.
//
//	go test -run '^$' -bench GuardedTx -count 3 ./guard/mysql
func BenchmarkGuardedTx(b *testing.B) {
	db := testDB(b)
	tt := newTestTables(b, db)
	ctx := context.Background()
	g, err := mysql.New(mysql.Options{Table: tt.guard, OpsTable: tt.ops})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (sku, qty) VALUES ('sku-42', 0)`, tt.stock)); err != nil {
		b.Fatal(err)
	}
	update := fmt.Sprintf(`UPDATE %s SET qty = ? WHERE sku = ?`, tt.stock)
	columnUpdate := fmt.Sprintf(`UPDATE %s SET qty = ?, fence_token = ? WHERE sku = ? AND fence_token <= ?`, tt.stock)
	col := mysql.Column{Table: tt.stock, Key: "sku", Token: "fence_token"}
	const token = 7
	inTx := func(fn func(tx *sql.Tx) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := fn(tx); err != nil {
			return err
		}
		return tx.Commit()
	}

	nsPerOp := map[string]float64{}
	run := func(name string, op func(i int) error) {
		b.Run(name, func(b *testing.B) {
			for i := range b.N {
				if err := op(i); err != nil {
					b.Fatal(err)
				}
			}
			nsPerOp[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	run("plain", func(i int) error {
		return inTx(func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, update, i, "sku-42")
			return err
		})
	})
	run("guarded", func(i int) error {
		return inTx(func(tx *sql.Tx) error {
			if err := g.Check(ctx, tx, "sku-42", token); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, update, i, "sku-42")
			return err
		})
	})
	run("column", func(int) error {
		// A new qty every time: MySQL counts an UPDATE to the same values
		// as 0 changed rows (see ErrNoMatch), and b.N restarts i.
		qty := benchOpSeq.Add(1)
		return inTx(func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, columnUpdate, qty, token, "sku-42", token)
			if err != nil {
				return err
			}
			return col.CheckRows(ctx, tx, res, "sku-42", token)
		})
	})
	run("do", func(i int) error {
		op := mysql.Op{Resource: "sku-42", Token: token, ID: "bench-" + strconv.FormatInt(benchOpSeq.Add(1), 10), Payload: []byte(strconv.Itoa(i))}
		_, _, err := g.Do(ctx, db, op, func(tx *sql.Tx) ([]byte, error) {
			_, err := tx.ExecContext(ctx, update, i, "sku-42")
			return nil, err
		})
		return err
	})
	plain := nsPerOp["plain"]
	for _, name := range []string{"guarded", "column", "do"} {
		if ns, ok := nsPerOp[name]; ok && plain > 0 {
			b.Logf("%-8s %8.0f ns/op = %.2f × plain (%+.0f%%)", name, ns, ns/plain, (ns/plain-1)*100)
		}
	}
}
