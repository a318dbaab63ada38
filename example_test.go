package fence_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/fenceworks/fence"
)

// A refusal is a value with facts: errors.Is names the kind, errors.As
// gives the numbers. This is what a store says to the story's worker A.
func ExampleStaleTokenError() {
	var err error = fmt.Errorf("write stock/sku-42: %w",
		&fence.StaleTokenError{Resource: "stock/sku-42", Token: 1, LastAccepted: 2})

	fmt.Println(errors.Is(err, fence.ErrStaleToken))
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("refused: token %d, the store has accepted %d\n", stale.Token, stale.LastAccepted)
	}
	fmt.Println(fence.ReasonOf(err))
	fmt.Println(err)
	// Output:
	// true
	// refused: token 1, the store has accepted 2
	// STALE_TOKEN
	// write stock/sku-42: token 1 is older than accepted token 2
}

// Bad input is refused with the field and the bound.
func ExampleValidateTTL() {
	err := fence.ValidateTTL(5*time.Millisecond, fence.DefaultMaxTTL)
	var inv *fence.InvalidError
	if errors.As(err, &inv) {
		fmt.Printf("%s: %s (%v)\n", inv.Field, inv.Bound, errors.Is(err, fence.ErrInvalid))
	}
	fmt.Println(fence.ValidateTTL(5*time.Second, fence.DefaultMaxTTL))
	// Output:
	// ttl: at least 10ms (true)
	// <nil>
}

// A client that sent its request at sent and was told the lease has
// remaining left may act as the holder until SafeDeadline: the remaining
// time less the clock-drift margin (1% here, at least 5ms).
func ExampleSafeDeadline() {
	sent := time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC)
	d := fence.SafeDeadline(sent, 5*time.Second, fence.DefaultDrift)
	fmt.Println(d.Sub(sent))
	fmt.Println(fence.SafeDeadline(sent, 100*time.Millisecond, fence.DefaultDrift).Sub(sent))
	// Output:
	// 4.95s
	// 95ms
}

// A store at one of its limits refuses with the limit named; nothing was
// changed, and the same request may succeed once there is room. The
// reason tells it from BUSY, which shares its transport code.
func ExampleResourceExhaustedError() {
	var err error = &fence.ResourceExhaustedError{Limit: `waiters on lock "x"`, Bound: "at most 1024", Got: "1024"}
	var ex *fence.ResourceExhaustedError
	if errors.As(err, &ex) {
		fmt.Println(ex.Limit, "/", ex.Bound)
	}
	fmt.Println(errors.Is(err, fence.ErrResourceExhausted), errors.Is(err, fence.ErrBusy))
	fmt.Println(fence.ReasonOf(err))
	fmt.Println(err)
	// Output:
	// waiters on lock "x" / at most 1024
	// true false
	// RESOURCE_EXHAUSTED
	// resource exhausted: waiters on lock "x": at most 1024 (now 1024)
}

// A guard holding the cluster's key set checks a token's proof before it
// compares the number: a made-up token is refused, whatever its size.
func ExampleKeySet_Verify() {
	seed := make([]byte, ed25519.SeedSize)
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	keys := &fence.KeySet{ClusterID: "prod", Keys: []fence.PublicKey{{ID: fence.KeyIDOf(pub), Key: pub}}}

	granted := fence.Sign(key, "prod", "orders/7", 2) // what the lease hands out
	fmt.Println(keys.Verify(granted, "orders/7"))
	fmt.Println(keys.Verify(fence.SignedToken{Token: 1<<53 - 1}, "orders/7"))
	fmt.Println(keys.Verify(granted, "orders/8"))
	// Output:
	// <nil>
	// forged token: token 9007199254740991 for "orders/7": no proof
	// forged token: token 2 for "orders/8": proof does not hold for this lock and token
}
