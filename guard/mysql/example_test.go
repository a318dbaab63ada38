package mysql_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/mysql"
	driver "github.com/go-sql-driver/mysql"
)

// exampleDB creates a database of its own on the test server (FENCE_TEST_MYSQL,
// default root@tcp(127.0.0.1:3306)/test) with a stock row for sku-42, and
// opens it; close drops it.
func exampleDB() (db *sql.DB, close func()) {
	cfg, err := driver.ParseDSN(testDSN())
	if err != nil {
		log.Fatal(err)
	}
	admin, err := sql.Open("mysql", testDSN())
	if err != nil {
		log.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "fence_example_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		log.Fatal(err)
	}
	cfg.DBName = name
	connector, err := driver.NewConnector(cfg)
	if err != nil {
		log.Fatal(err)
	}
	db = sql.OpenDB(connector)
	for _, stmt := range []string{
		`CREATE TABLE stock (sku VARCHAR(64) PRIMARY KEY, qty INT NOT NULL, fence_token BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`,
		`INSERT INTO stock (sku, qty) VALUES ('sku-42', 10)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			log.Fatal(err)
		}
	}
	return db, func() {
		db.Close()
		if _, err := admin.Exec("DROP DATABASE " + name); err != nil {
			log.Print(err)
		}
		admin.Close()
	}
}

// The paused-worker story: worker B (token 2) writes stock = 8; worker A (token 1)
// wakes from a pause and tries stock = 5. MariaDB refuses A's write.
func ExampleCheck() {
	db, close := exampleDB()
	defer close()
	ctx := context.Background()
	if err := mysql.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}

	setStock := func(token fence.Token, qty int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := mysql.Check(ctx, tx, "sku-42", token); err != nil {
			return err // rolled back: nothing written
		}
		if _, err := tx.ExecContext(ctx, `UPDATE stock SET qty = ? WHERE sku = ?`, qty, "sku-42"); err != nil {
			return err
		}
		return tx.Commit()
	}

	fmt.Println("B writes 8:", setStock(2, 8))
	err := setStock(1, 5)
	fmt.Println("A writes 5:", err)
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("refused: token %d, last accepted %d\n", stale.Token, stale.LastAccepted)
	}
	var qty int
	_ = db.QueryRow(`SELECT qty FROM stock WHERE sku = 'sku-42'`).Scan(&qty)
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
	db, close := exampleDB()
	defer close()
	ctx := context.Background()
	col := mysql.Column{Table: "stock", Key: "sku", Token: "fence_token"}

	setStock := func(token fence.Token, qty int) error {
		res, err := db.ExecContext(ctx, `UPDATE stock SET qty = ?, fence_token = ? WHERE sku = ? AND fence_token <= ?`,
			qty, int64(token), "sku-42", int64(token))
		if err != nil {
			return err
		}
		return col.CheckRows(ctx, db, res, "sku-42", token)
	}

	fmt.Println("B writes 8:", setStock(2, 8))
	err := setStock(1, 5)
	fmt.Println("A writes 5:", err, errors.Is(err, fence.ErrStaleToken))

	res, _ := db.ExecContext(ctx, `UPDATE stock SET qty = 1, fence_token = 3 WHERE sku = 'nope' AND fence_token <= 3`)
	err = col.CheckRows(ctx, db, res, "nope", 3)
	fmt.Println("missing row:", errors.Is(err, mysql.ErrNoRow))
	// Output:
	// B writes 8: <nil>
	// A writes 5: token 1 is older than accepted token 2 true
	// missing row: true
}

// An idempotent fenced operation: B's reply was lost, B retries with the
// same op_id, and the write is not applied twice.
func ExampleDo() {
	db, close := exampleDB()
	defer close()
	ctx := context.Background()
	if err := mysql.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}

	sell := mysql.Op{Resource: "sku-42", Token: 2, ID: "order-1001", Payload: []byte("sell 2")}
	apply := func(tx *sql.Tx) ([]byte, error) {
		if _, err := tx.ExecContext(ctx, `UPDATE stock SET qty = qty - 2 WHERE sku = 'sku-42'`); err != nil {
			return nil, err
		}
		var qty int
		err := tx.QueryRowContext(ctx, `SELECT qty FROM stock WHERE sku = 'sku-42'`).Scan(&qty)
		return fmt.Appendf(nil, "qty=%d", qty), err
	}

	for attempt := 1; attempt <= 2; attempt++ {
		result, replayed, err := mysql.Do(ctx, db, sell, apply)
		fmt.Printf("attempt %d: %s replayed=%v err=%v\n", attempt, result, replayed, err)
	}
	_, _, err := mysql.Do(ctx, db, mysql.Op{Resource: "sku-42", Token: 2, ID: "order-1001", Payload: []byte("sell 5")}, apply)
	fmt.Println("same op_id, other payload:", err)
	// Output:
	// attempt 1: qty=8 replayed=false err=<nil>
	// attempt 2: qty=8 replayed=true err=<nil>
	// same op_id, other payload: op_id "order-1001" was already used with a different payload
}

// MaxTokenFound is what `fence guard max-token --mysql DSN` reads: the
// largest accepted token, and whether the table had any row at all.
func ExampleMaxTokenFound() {
	db, close := exampleDB()
	defer close()
	ctx := context.Background()
	if err := mysql.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
	max, found, err := mysql.MaxTokenFound(ctx, db)
	fmt.Println("empty:", max, found, err)
	for _, c := range []struct {
		resource string
		token    fence.Token
	}{{"sku-1", 3}, {"sku-2", 9}, {"sku-3", 5}} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		if err := mysql.Check(ctx, tx, c.resource, c.token); err != nil {
			log.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
	}
	max, found, err = mysql.MaxTokenFound(ctx, db)
	fmt.Println("after three checks:", max, found, err)
	// Output:
	// empty: 0 false <nil>
	// after three checks: 9 true <nil>
}

// Signed tokens: the guard is given the cluster's public keys (here a test
// key; in production `fence keys --json`, read with fence.ParseKeySet) and
// every token carries its proof (here made with fence.Sign; in production
// lease.SignedToken()). A forged token is refused before any write, and the
// paused-worker story holds.
func ExampleGuard_CheckSigned() {
	db, close := exampleDB()
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
	g, err := mysql.New(mysql.Options{KeySet: ks})
	if err != nil {
		log.Fatal(err)
	}
	if err := g.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}

	setStock := func(token fence.SignedToken, qty int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := g.CheckSigned(ctx, tx, "sku-42", token); err != nil {
			return err // rolled back: nothing written
		}
		if _, err := tx.ExecContext(ctx, `UPDATE stock SET qty = ? WHERE sku = ?`, qty, "sku-42"); err != nil {
			return err
		}
		return tx.Commit()
	}

	fmt.Println("B writes 8:", setStock(fence.Sign(key, "prod", "sku-42", 2), 8))
	fmt.Println("A writes 5:", setStock(fence.Sign(key, "prod", "sku-42", 1), 5))
	fmt.Println("made up:", setStock(fence.SignedToken{Token: fence.MaxTokenJSONInt}, 0))
	err = setStock(fence.Sign(key, "prod", "sku-7", 3), 0)
	fmt.Println("another lock's proof:", errors.Is(err, fence.ErrForgedToken), err)
	var qty int
	_ = db.QueryRow(`SELECT qty FROM stock WHERE sku = 'sku-42'`).Scan(&qty)
	fmt.Println("stock:", qty)
	// Output:
	// B writes 8: <nil>
	// A writes 5: token 1 is older than accepted token 2
	// made up: forged token: token 9007199254740991 for "sku-42": no proof
	// another lock's proof: true forged token: token 3 for "sku-42": proof does not hold for this lock and token
	// stock: 8
}
