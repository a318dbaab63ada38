package redisguard_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"

	"github.com/fenceworks/fence"
	redisguard "github.com/fenceworks/fence/guard/redis"
	"github.com/redis/go-redis/v9"
)

func exampleClient() *redis.Client {
	addr := os.Getenv("FENCE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	if opts, err := redis.ParseURL(addr); err == nil {
		return redis.NewClient(opts)
	}
	return redis.NewClient(&redis.Options{Addr: addr})
}

// The paused-worker story on Redis: worker B (token 2) writes 8, worker A wakes up
// with token 1 and tries 5 — the script refuses it.
func Example() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	// The test Redis runs without persistence: AcceptVolatile lets the guard
	// use it (with a logged warning). In production configure appendonly yes,
	// appendfsync always and maxmemory-policy noeviction, and leave it unset.
	g, err := redisguard.New(rdb, redisguard.Options{Prefix: "example.story", AcceptVolatile: true})
	if err != nil {
		panic(err)
	}
	defer rdb.Del(ctx, "{13:example.story:sku-42}")

	if _, err := g.Set(ctx, "sku-42", 2, []byte("8"), ""); err != nil {
		panic(err)
	}
	_, err = g.Set(ctx, "sku-42", 1, []byte("5"), "")
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Println("refused:", err)
	}
	st, _ := g.Get(ctx, "sku-42")
	fmt.Printf("stock=%s last_token=%d\n", st.Value, st.Token)
	// Output:
	// refused: token 1 is older than accepted token 2
	// stock=8 last_token=2
}

// A retried Add with the same op_id is not applied twice.
func ExampleGuard_Add() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	g, err := redisguard.New(rdb, redisguard.Options{Prefix: "example.add", AcceptVolatile: true}) // see Example
	if err != nil {
		panic(err)
	}
	defer rdb.Del(ctx, "{11:example.add:stock}", "{11:example.add:stock}:op:6f702d31")

	r, _ := g.Add(ctx, "stock", 2, -3, "op-1")
	fmt.Println(r.Sum, r.Replayed)
	r, _ = g.Add(ctx, "stock", 2, -3, "op-1") // the reply was lost; retry
	fmt.Println(r.Sum, r.Replayed)
	// Output:
	// -3 false
	// -3 true
}

// Signed tokens on Redis: the guard is given the cluster's public keys
// (here a test key; in production `fence keys --json`, read with
// fence.ParseKeySet) and every token carries its proof (here made with
// fence.Sign; in production lease.SignedToken()). A forged token never
// reaches Redis, and the paused-worker story holds.
func ExampleGuard_SetSigned() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)
	ks := &fence.KeySet{ClusterID: "prod", Keys: []fence.PublicKey{{ID: fence.KeyIDOf(pub), Key: pub}}}
	g, err := redisguard.New(rdb, redisguard.Options{Prefix: "example.signed", AcceptVolatile: true, KeySet: ks}) // see Example
	if err != nil {
		panic(err)
	}
	defer rdb.Del(ctx, "{14:example.signed:sku-42}")

	set := func(tok fence.SignedToken, v string) error {
		_, err := g.SetSigned(ctx, "sku-42", tok, []byte(v), "")
		return err
	}
	fmt.Println("B writes 8:", set(fence.Sign(key, "prod", "sku-42", 2), "8"))
	fmt.Println("A writes 5:", set(fence.Sign(key, "prod", "sku-42", 1), "5"))
	fmt.Println("made up:", set(fence.SignedToken{Token: fence.MaxTokenJSONInt}, "0"))
	st, _ := g.Get(ctx, "sku-42")
	fmt.Printf("stock=%s last_token=%d\n", st.Value, st.Token)
	// Output:
	// B writes 8: <nil>
	// A writes 5: token 1 is older than accepted token 2
	// made up: forged token: token 9007199254740991 for "sku-42": no proof
	// stock=8 last_token=2
}
