package state_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// The paused-worker story: A's lease runs out while it is paused, B takes over,
// and A's late write is refused by the fenced resource.
func Example() {
	m := state.New()
	sec := int64(time.Second)

	a := m.Apply(state.Command{Op: state.OpAcquire, Now: 0, Name: "sku-42", Owner: "A", TTL: 5 * time.Second})
	fmt.Println("A got token", a.Lease.Token)

	m.Apply(state.Command{Op: state.OpTick, Now: 5 * sec})
	b := m.Apply(state.Command{Op: state.OpAcquire, Now: 6 * sec, Name: "sku-42", Owner: "B", TTL: 5 * time.Second})
	fmt.Println("B got token", b.Lease.Token)

	m.Apply(state.Command{Op: state.OpWrite, Now: 6 * sec, Name: "stock", Token: b.Lease.Token, Value: []byte("8")})
	late := m.Apply(state.Command{Op: state.OpWrite, Now: 7 * sec, Name: "stock", Token: a.Lease.Token, Value: []byte("5")})
	var stale *fence.StaleTokenError
	if errors.As(late.Err, &stale) {
		fmt.Println("A refused:", stale)
	}
	st := m.Resource("stock")
	fmt.Printf("stock = %s (last token %d)\n", st.Value, st.LastToken)
	// Output:
	// A got token 1
	// B got token 2
	// A refused: token 1 is older than accepted token 2
	// stock = 8 (last token 2)
}

// A blocking acquire queues; the release hands the lock over in the same
// apply, reported as an Event for the waiter's request_id.
func ExampleMachine_Apply_wait() {
	m := state.New()
	m.Apply(state.Command{Op: state.OpAcquire, Name: "job", Owner: "A", TTL: time.Minute})
	q := m.Apply(state.Command{Op: state.OpAcquire, Name: "job", Owner: "B", TTL: time.Minute, Wait: time.Minute, RequestID: "b-1"})
	fmt.Println("queued:", q.Queued)

	r := m.Apply(state.Command{Op: state.OpRelease, Name: "job", Token: 1})
	for _, ev := range r.Events {
		fmt.Println(ev.RequestID, "granted token", ev.Lease.Token)
	}
	// Output:
	// queued: true
	// b-1 granted token 2
}

// Slack: the node stamps each command with the commit lag it has seen, and
// the machine decides expiry that far behind Now, so a lease committed 3ms
// after its stamp still lives its full TTL after the commit.
func ExampleCommand_slack() {
	m := state.New()
	ms := int64(time.Millisecond)
	const slack = 3 * time.Millisecond
	m.Apply(state.Command{Op: state.OpAcquire, Now: 0, Slack: slack, Name: "job", Owner: "A", TTL: time.Second})

	early := m.Apply(state.Command{Op: state.OpAcquire, Now: 1002 * ms, Slack: slack, Name: "job", Owner: "B", TTL: time.Second})
	fmt.Println("at 1002ms:", early.Err)
	late := m.Apply(state.Command{Op: state.OpAcquire, Now: 1003 * ms, Slack: slack, Name: "job", Owner: "B", TTL: time.Second})
	fmt.Println("at 1003ms: B got token", late.Lease.Token)
	fmt.Println("max slack:", m.MaxSlack())
	// Output:
	// at 1002ms: lock "job" is held by "A" (token 1, 0s left)
	// at 1003ms: B got token 2
	// max slack: 3ms
}

// The rules are in the log: an OpConfig lowers the largest TTL for the
// commands after it, and the lease acknowledged before it keeps its TTL and
// its token.
func ExampleOpConfig() {
	m := state.New() // DefaultConfig: the rules before any OpConfig
	cfg := state.DefaultConfig()
	m.Apply(state.Command{Op: state.OpConfig, Config: cfg})
	a := m.Apply(state.Command{Op: state.OpAcquire, Name: "a", Owner: "A", TTL: 2 * time.Hour})

	cfg.MaxTTL = time.Hour
	m.Apply(state.Command{Op: state.OpConfig, Config: cfg})
	fmt.Println("max ttl now:", m.Config().MaxTTL)
	fmt.Println("a still held with", m.Lock("a", 0).Lease.TTL, "token", a.Lease.Token)
	b := m.Apply(state.Command{Op: state.OpAcquire, Name: "b", Owner: "B", TTL: 2 * time.Hour})
	fmt.Println("b:", b.Err)
	// Output:
	// max ttl now: 1h0m0s
	// a still held with 2h0m0s token 1
	// b: invalid ttl 2h0m0s: must be at most 1h0m0s
}

// A retried blocking acquire is a new attempt; the first attempt's late
// cancel names attempt 1 and changes nothing.
func ExampleMachine_Queued() {
	m := state.New()
	m.Apply(state.Command{Op: state.OpConfig, Config: state.DefaultConfig()})
	m.Apply(state.Command{Op: state.OpAcquire, Name: "job", Owner: "A", TTL: time.Minute})
	wait := state.Command{Op: state.OpAcquire, Name: "job", Owner: "B", TTL: time.Minute, Wait: time.Minute, RequestID: "b-1"}
	first := m.Apply(wait)
	retry := m.Apply(wait)
	fmt.Println("attempts:", first.Attempt, retry.Attempt)
	m.Apply(state.Command{Op: state.OpCancelWait, Name: "job", RequestID: "b-1", Attempt: first.Attempt})
	fmt.Printf("%+v\n", m.Queued())
	// Output:
	// attempts: 1 2
	// [{Name:job RequestID:b-1 Attempt:2}]
}
