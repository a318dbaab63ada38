package postgres_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
)

// benchOpSeq makes every Do of every benchmark run a new op (a repeated
// op_id would be a cheap replay).
var benchOpSeq atomic.Int64

// BenchmarkGuardedTx compares, in one process, the same stock update as a
// plain transaction, guarded by Check, in the column pattern, and through
// Do, and logs each cost relative to the plain transaction.
//
//	go test -run '^$' -bench GuardedTx -count 3 ./guard/postgres
func BenchmarkGuardedTx(b *testing.B) {
	db := testPool(b)
	tt := newTestTables(b, db)
	ctx := context.Background()
	g, err := postgres.New(postgres.Options{Table: tt.guard, OpsTable: tt.ops})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (sku, qty) VALUES ('sku-42', 0)`, tt.stock)); err != nil {
		b.Fatal(err)
	}
	update := fmt.Sprintf(`UPDATE %s SET qty = $1 WHERE sku = $2`, tt.stock)
	columnUpdate := fmt.Sprintf(`UPDATE %s SET qty = $1, fence_token = $2 WHERE sku = $3 AND fence_token <= $2`, tt.stock)
	col := postgres.Column{Table: tt.stock, Key: "sku", Token: "fence_token"}
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
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, update, i, "sku-42")
			return err
		})
	})
	run("guarded", func(i int) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := g.Check(ctx, tx, "sku-42", token); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, update, i, "sku-42")
			return err
		})
	})
	run("column", func(i int) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, columnUpdate, i, token, "sku-42")
			if err != nil {
				return err
			}
			return col.CheckRows(ctx, tx, tag, "sku-42", token)
		})
	})
	run("do", func(i int) error {
		op := postgres.Op{Resource: "sku-42", Token: token, ID: "bench-" + strconv.FormatInt(benchOpSeq.Add(1), 10), Payload: []byte(strconv.Itoa(i))}
		_, _, err := g.Do(ctx, db, op, func(tx pgx.Tx) ([]byte, error) {
			_, err := tx.Exec(ctx, update, i, "sku-42")
			return nil, err
		})
		return err
	})
	logRatios(b, nsPerOp)
}

func logRatios(b *testing.B, nsPerOp map[string]float64) {
	plain := nsPerOp["plain"]
	if plain == 0 {
		return
	}
	for _, name := range []string{"guarded", "column", "do"} {
		if ns, ok := nsPerOp[name]; ok {
			b.Logf("%-8s %8.0f ns/op = %.2f × plain (%+.0f%%)", name, ns, ns/plain, (ns/plain-1)*100)
		}
	}
}

// BenchmarkSignedCheck is the cost of verifying a signed token's proof per
// guarded write: the same Check transaction by a guard without a key set
// (unsigned, as before issue 22) and by a guard with one (signed: Ed25519
// verification in Go before the statement), in one run, and the
// verification alone (Verify, no database).
//
//	go test -run '^$' -bench SignedCheck -count 3 ./guard/postgres
func BenchmarkSignedCheck(b *testing.B) {
	db := testPool(b)
	tt := newTestTables(b, db)
	ctx := context.Background()
	seed := make([]byte, ed25519.SeedSize)
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	ks := &fence.KeySet{ClusterID: "bench", Keys: []fence.PublicKey{{ID: fence.KeyIDOf(pub), Key: pub}}}
	unsigned, err := postgres.New(postgres.Options{Table: tt.guard, OpsTable: tt.ops})
	if err != nil {
		b.Fatal(err)
	}
	signed, err := postgres.New(postgres.Options{Table: tt.guard, OpsTable: tt.ops, KeySet: ks})
	if err != nil {
		b.Fatal(err)
	}
	if err := unsigned.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	st := fence.Sign(key, "bench", "sku-42", 7)
	nsPerOp := map[string]float64{}
	run := func(name string, op func() error) {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
			nsPerOp[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	run("unsigned", func() error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return unsigned.Check(ctx, tx, "sku-42", st.Token) })
	})
	run("signed", func() error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return signed.CheckSigned(ctx, tx, "sku-42", st) })
	})
	run("verify-only", func() error { return signed.Verify("sku-42", st) })
	if u, s := nsPerOp["unsigned"], nsPerOp["signed"]; u > 0 && s > 0 {
		b.Logf("signed %8.0f ns/op = %.3f × unsigned (%+.1f%%); verification alone %.0f ns", s, s/u, (s/u-1)*100, nsPerOp["verify-only"])
	}
}
