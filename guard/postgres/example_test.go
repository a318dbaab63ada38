package postgres_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// exampleDB connects to the test PostgreSQL with a fresh schema first on
// the search_path, so the examples can use the default table names without
// meeting anyone else's; close drops the schema.
func exampleDB() (pool *pgxpool.Pool, close func()) {
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "fence_example_" + hex.EncodeToString(b)
	admin, err := pgx.Connect(ctx, testDSN())
	if err != nil {
		log.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		log.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(testDSN())
	if err != nil {
		log.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE stock (sku text PRIMARY KEY, qty bigint NOT NULL, fence_token bigint NOT NULL DEFAULT 0);
INSERT INTO stock (sku, qty) VALUES ('sku-42', 10)`); err != nil {
		log.Fatal(err)
	}
	return pool, func() {
		pool.Close()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			log.Print(err)
		}
		admin.Close(ctx)
	}
}

// The paused-worker story: worker B (token 2) writes stock = 8; worker A (token 1)
// wakes from a pause and tries stock = 5. PostgreSQL refuses A's write.
func ExampleCheck() {
	pool, close := exampleDB()
	defer close()
	ctx := context.Background()
	if err := postgres.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}

	setStock := func(token fence.Token, qty int) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := postgres.Check(ctx, tx, "sku-42", token); err != nil {
				return err // rolled back: nothing written
			}
			_, err := tx.Exec(ctx, `UPDATE stock SET qty = $1 WHERE sku = $2`, qty, "sku-42")
			return err
		})
	}

	fmt.Println("B writes 8:", setStock(2, 8))
	err := setStock(1, 5)
	fmt.Println("A writes 5:", err)
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("refused: token %d, last accepted %d\n", stale.Token, stale.LastAccepted)
	}
	var qty int
	_ = pool.QueryRow(ctx, `SELECT qty FROM stock WHERE sku = 'sku-42'`).Scan(&qty)
	fmt.Println("stock:", qty)
	// Output:
	// B writes 8: <nil>
	// A writes 5: token 1 is older than accepted token 2
	// refused: token 1, last accepted 2
	// stock: 8
}

// The column pattern: the token lives in the stock row itself and the UPDATE
// compares it; CheckRows turns "0 rows" into the reason.
func ExampleColumn_CheckRows() {
	pool, close := exampleDB()
	defer close()
	ctx := context.Background()
	col := postgres.Column{Table: "stock", Key: "sku", Token: "fence_token"}

	setStock := func(token fence.Token, qty int) error {
		tag, err := pool.Exec(ctx, `UPDATE stock SET qty = $1, fence_token = $2 WHERE sku = $3 AND fence_token <= $2`,
			qty, int64(token), "sku-42")
		if err != nil {
			return err
		}
		return col.CheckRows(ctx, pool, tag, "sku-42", token)
	}

	fmt.Println("B writes 8:", setStock(2, 8))
	err := setStock(1, 5)
	fmt.Println("A writes 5:", err, errors.Is(err, fence.ErrStaleToken))

	tag, _ := pool.Exec(ctx, `UPDATE stock SET qty = 1, fence_token = 3 WHERE sku = 'nope' AND fence_token <= 3`)
	err = col.CheckRows(ctx, pool, tag, "nope", 3)
	fmt.Println("missing row:", errors.Is(err, postgres.ErrNoRow))
	// Output:
	// B writes 8: <nil>
	// A writes 5: token 1 is older than accepted token 2 true
	// missing row: true
}

// An idempotent fenced operation: B's reply was lost, B retries with the
// same op_id, and the write is not applied twice.
func ExampleDo() {
	pool, close := exampleDB()
	defer close()
	ctx := context.Background()
	if err := postgres.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}

	sell := postgres.Op{Resource: "sku-42", Token: 2, ID: "order-1001", Payload: []byte("sell 2")}
	apply := func(tx pgx.Tx) ([]byte, error) {
		var qty int
		err := tx.QueryRow(ctx, `UPDATE stock SET qty = qty - 2 WHERE sku = 'sku-42' RETURNING qty`).Scan(&qty)
		return fmt.Appendf(nil, "qty=%d", qty), err
	}

	for attempt := 1; attempt <= 2; attempt++ {
		result, replayed, err := postgres.Do(ctx, pool, sell, apply)
		fmt.Printf("attempt %d: %s replayed=%v err=%v\n", attempt, result, replayed, err)
	}
	_, _, err := postgres.Do(ctx, pool, postgres.Op{Resource: "sku-42", Token: 2, ID: "order-1001", Payload: []byte("sell 5")}, apply)
	fmt.Println("same op_id, other payload:", err)
	// Output:
	// attempt 1: qty=8 replayed=false err=<nil>
	// attempt 2: qty=8 replayed=true err=<nil>
	// same op_id, other payload: op_id "order-1001" was already used with a different payload
}

// Signed tokens: the guard is given the cluster's public keys (here a test
// key; in production `fence keys --json`, read with fence.ParseKeySet) and
// every token carries its proof (here made with fence.Sign; in production
// lease.SignedToken()). A forged token is refused before any write, and the
// paused-worker story holds.
func ExampleGuard_CheckSigned() {
	pool, close := exampleDB()
	defer close()
	ctx := context.Background()
	// A test cluster's signing key and the key set its guards are given.
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)
	published, _ := json.Marshal(&fence.KeySet{ClusterID: "prod", Keys: []fence.PublicKey{{ID: fence.KeyIDOf(pub), Key: pub}}})
	ks, err := fence.ParseKeySet(published) // what `fence keys --json` prints
	if err != nil {
		log.Fatal(err)
	}
	g, err := postgres.New(postgres.Options{KeySet: ks})
	if err != nil {
		log.Fatal(err)
	}
	if err := g.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}

	setStock := func(token fence.SignedToken, qty int) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := g.CheckSigned(ctx, tx, "sku-42", token); err != nil {
				return err // rolled back: nothing written
			}
			_, err := tx.Exec(ctx, `UPDATE stock SET qty = $1 WHERE sku = $2`, qty, "sku-42")
			return err
		})
	}

	fmt.Println("B writes 8:", setStock(fence.Sign(key, "prod", "sku-42", 2), 8))
	fmt.Println("A writes 5:", setStock(fence.Sign(key, "prod", "sku-42", 1), 5))
	fmt.Println("made up:", setStock(fence.SignedToken{Token: fence.MaxTokenJSONInt}, 0))
	err = setStock(fence.Sign(key, "prod", "sku-7", 3), 0)
	fmt.Println("another lock's proof:", errors.Is(err, fence.ErrForgedToken), err)
	var qty int
	_ = pool.QueryRow(ctx, `SELECT qty FROM stock WHERE sku = 'sku-42'`).Scan(&qty)
	fmt.Println("stock:", qty)
	// Output:
	// B writes 8: <nil>
	// A writes 5: token 1 is older than accepted token 2
	// made up: forged token: token 9007199254740991 for "sku-42": no proof
	// another lock's proof: true forged token: token 3 for "sku-42": proof does not hold for this lock and token
	// stock: 8
}
