package sqlite_test

import (
	"context"
	"database/sql"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/fenceworks/fence/guard/sqlite"
)

// benchOpSeq makes every Do of every benchmark run a new op (a repeated
// op_id would be a cheap replay).
var benchOpSeq atomic.Int64

// BenchmarkGuardedTx compares, in one process, the same stock update as a
// plain transaction, guarded by Check, in the column pattern, and through
// Do, and logs each cost relative to the plain transaction. The database is
// a WAL file in a temporary directory (synchronous=FULL, SQLite's default).
//
//	go test -run '^$' -bench GuardedTx -count 3 ./guard/sqlite
func BenchmarkGuardedTx(b *testing.B) {
	db := openTestDB(b)
	ctx := context.Background()
	g, err := sqlite.New(sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO stock (sku, qty) VALUES ('sku-42', 0)`); err != nil {
		b.Fatal(err)
	}
	const update = `UPDATE stock SET qty = ?1 WHERE sku = ?2`
	const columnUpdate = `UPDATE stock SET qty = ?1, fence_token = ?2 WHERE sku = ?3 AND fence_token <= ?2`
	col := sqlite.Column{Table: "stock", Key: "sku", Token: "fence_token"}
	const token = 7

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
		return inTx(ctx, db, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, update, i, "sku-42")
			return err
		})
	})
	run("guarded", func(i int) error {
		return inTx(ctx, db, func(tx *sql.Tx) error {
			if err := g.Check(ctx, tx, "sku-42", token); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, update, i, "sku-42")
			return err
		})
	})
	run("column", func(i int) error {
		return inTx(ctx, db, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, columnUpdate, i, token, "sku-42")
			if err != nil {
				return err
			}
			return col.CheckRows(ctx, tx, res, "sku-42", token)
		})
	})
	run("do", func(i int) error {
		op := sqlite.Op{Resource: "sku-42", Token: token, ID: "bench-" + strconv.FormatInt(benchOpSeq.Add(1), 10), Payload: []byte(strconv.Itoa(i))}
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
