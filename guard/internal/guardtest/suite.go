package guardtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// NewStore makes a migrated Store with fresh tables for t.
type NewStore func(t *testing.T, o Options) Store

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(*testing.T, NewStore)
	}{
		{"MigrateIsIdempotent", testMigrateIdempotent},
		{"StaleRefusedWithBothTokens", testStaleRefused},
		{"EqualTokenAccepted", testEqualAccepted},
		{"NewerTokenAccepted", testNewerAccepted},
		{"InvalidInputRefused", testInvalid},
		{"StaleWriteLeavesDataAndToken", testStaleWriteLeavesData},
		{"FailingFnRollsBackDataAndToken", testFailingFnRollsBack},
		{"RepeatedOpAppliesOnce", testRepeatedOp},
		{"RetryOfAppliedOpReplaysAfterNewerToken", testReplayAfterNewer},
		{"ConflictingPayloadRefused", testConflictingPayload},
		{"StaleNewOpRefused", testStaleNewOp},
		{"ConcurrentSameOpAppliesOnce", testConcurrentSameOp},
		{"ColumnPattern", testColumnPattern},
		{"MaxToken", testMaxToken},
		{"PruneRemovesOldOps", testPrune},
		{"DoPrunesEveryN", testDoPrunes},
		{"ConcurrentWritersHistory", testConcurrentHistory},
		{"Signed/ForgedRefusedStoredTokenUnchanged", testForgedRefused},
		{"Signed/PausedWorker", testPausedWorkerSigned},
		{"Signed/UnsignedNeedsAllowUnsigned", testUnsignedNeedsAllow},
		{"Signed/LockFor", testLockFor},
		{"Signed/KeySourceReloads", testKeySource},
		{"Signed/NoKeySetComparesAnyToken", testNoKeySetCompares},
		{"RepairLowersPoisonedTokens", testRepair},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
	// The same rules hold for Do split into CheckOp and SaveOp.
	split := func(t *testing.T, o Options) Store { return splitStore{newStore(t, o)} }
	for _, tc := range tests {
		switch tc.name {
		case "InvalidInputRefused", "FailingFnRollsBackDataAndToken", "RepeatedOpAppliesOnce",
			"RetryOfAppliedOpReplaysAfterNewerToken", "ConflictingPayloadRefused", "StaleNewOpRefused",
			"ConcurrentSameOpAppliesOnce", "DoPrunesEveryN", "Signed/ForgedRefusedStoredTokenUnchanged",
			"Signed/PausedWorker", "Signed/UnsignedNeedsAllowUnsigned":
			t.Run("SplitDo/"+tc.name, func(t *testing.T) { tc.fn(t, split) })
		}
	}
}

// splitStore answers Do with the Store's SplitDo.
type splitStore struct{ Store }

func (s splitStore) Do(ctx context.Context, op Op, fn func(write func(value int64) error) ([]byte, error)) ([]byte, bool, error) {
	return s.Store.SplitDo(ctx, op, fn)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func lastToken(t *testing.T, s Store, resource string) fence.Token {
	t.Helper()
	tok, found, err := s.LastToken(context.Background(), resource)
	must(t, err)
	if !found {
		t.Fatalf("no guard row for %q", resource)
	}
	return tok
}

// opCount counts the op records, failing the test if it cannot.
func opCount(t *testing.T, s Store) int {
	t.Helper()
	n, err := s.OpCount(context.Background())
	must(t, err)
	return n
}

// dataSeq reads the data row's seq (0 when there is none), failing the test
// if it cannot.
func dataSeq(t *testing.T, s Store, resource string) int64 {
	t.Helper()
	_, seq, _, err := s.Data(context.Background(), resource)
	must(t, err)
	return seq
}

func wantStale(t *testing.T, err error, resource string, token, last fence.Token) {
	t.Helper()
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("err = %v, want ErrStaleToken", err)
	}
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) {
		t.Fatalf("err = %T %v, want *fence.StaleTokenError", err, err)
	}
	if stale.Resource != resource || stale.Token != token || stale.LastAccepted != last {
		t.Fatalf("stale = %+v, want {Resource:%s Token:%d LastAccepted:%d}", *stale, resource, token, last)
	}
}

func testMigrateIdempotent(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	must(t, s.Check(ctx, "r", 4))
	must(t, s.Migrate(ctx)) // again: keeps the data
	must(t, s.Migrate(ctx))
	if got := lastToken(t, s, "r"); got != 4 {
		t.Fatalf("last token after re-migrate = %d, want 4", got)
	}
}

func testStaleRefused(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	must(t, s.Check(ctx, "sku-42", 2))
	wantStale(t, s.Check(ctx, "sku-42", 1), "sku-42", 1, 2)
	if got := lastToken(t, s, "sku-42"); got != 2 {
		t.Fatalf("last token = %d after a refused check, want 2", got)
	}
	if msg := s.Check(ctx, "sku-42", 1).Error(); msg != "token 1 is older than accepted token 2" {
		t.Fatalf("message = %q", msg)
	}
}

func testEqualAccepted(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	must(t, s.Check(ctx, "r", 5))
	must(t, s.Check(ctx, "r", 5))
	if _, err := s.GuardedWrite(ctx, "r", 5, 50); err != nil {
		t.Fatalf("equal token refused: %v", err)
	}
	if got := lastToken(t, s, "r"); got != 5 {
		t.Fatalf("last token = %d, want 5", got)
	}
}

func testNewerAccepted(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	must(t, s.Check(ctx, "r", 5))
	must(t, s.Check(ctx, "r", 7))
	if got := lastToken(t, s, "r"); got != 7 {
		t.Fatalf("last token = %d, want 7", got)
	}
	// Resources are independent.
	must(t, s.Check(ctx, "other", 1))
	if got := lastToken(t, s, "other"); got != 1 {
		t.Fatalf("other's last token = %d, want 1", got)
	}
}

func testInvalid(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	cases := []struct {
		name, field string
		err         error
	}{
		{"token 0", "token", s.Check(ctx, "r", 0)},
		{"token above 2^53-1", "token", s.Check(ctx, "r", fence.MaxTokenJSONInt+1)},
		{"empty resource", "resource", s.Check(ctx, "", 1)},
		{"oversize resource", "resource", s.Check(ctx, strings.Repeat("x", fence.MaxNameBytes+1), 1)},
		{"non-UTF-8 resource", "resource", s.Check(ctx, "\xff", 1)},
		{"Do token 0", "token", doErr(s.Do(ctx, Op{Resource: "r", Token: 0, ID: "op"}, noop))},
		{"Do empty op_id", "op_id", doErr(s.Do(ctx, Op{Resource: "r", Token: 1, ID: ""}, noop))},
		{"Do oversize op_id", "op_id", doErr(s.Do(ctx, Op{Resource: "r", Token: 1, ID: strings.Repeat("o", fence.MaxIDBytes+1)}, noop))},
		{"Do empty resource", "resource", doErr(s.Do(ctx, Op{Resource: "", Token: 1, ID: "op"}, noop))},
		{"Prune negative", "older_than", pruneErr(s.Prune(ctx, -time.Second))},
	}
	for _, c := range cases {
		var inv *fence.InvalidError
		if !errors.As(c.err, &inv) || !errors.Is(c.err, fence.ErrInvalid) {
			t.Errorf("%s: err = %v, want *fence.InvalidError", c.name, c.err)
			continue
		}
		if inv.Field != c.field || inv.Bound == "" {
			t.Errorf("%s: InvalidError %+v, want field %q and a bound", c.name, *inv, c.field)
		}
	}
	if max, err := s.MaxToken(ctx); err != nil || max != 0 {
		t.Fatalf("after refused input MaxToken = %d, %v; want 0 (nothing written)", max, err)
	}
	if n, err := s.OpCount(ctx); err != nil || n != 0 {
		t.Fatalf("after refused input op records = %d, %v; want 0", n, err)
	}
}

func noop(func(int64) error) ([]byte, error) { return nil, nil }

func doErr(_ []byte, _ bool, err error) error { return err }

func pruneErr(_ int64, err error) error { return err }

func testStaleWriteLeavesData(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	// The story: B (token 2) writes 8, then A (token 1) tries 5.
	if _, err := s.GuardedWrite(ctx, "sku-42", 2, 8); err != nil {
		t.Fatal(err)
	}
	_, err := s.GuardedWrite(ctx, "sku-42", 1, 5)
	wantStale(t, err, "sku-42", 1, 2)
	value, seq, _, err := s.Data(ctx, "sku-42")
	must(t, err)
	if value != 8 || seq != 1 {
		t.Fatalf("data = %d (seq %d), want 8 (seq 1): the stale write got through", value, seq)
	}
}

func testFailingFnRollsBack(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	_, _, err := s.Do(ctx, Op{Resource: "r", Token: 3, ID: "op-1"}, func(write func(int64) error) ([]byte, error) {
		return []byte("ok"), write(30)
	})
	must(t, err)
	boom := errors.New("boom")
	_, _, err = s.Do(ctx, Op{Resource: "r", Token: 9, ID: "op-2"}, func(write func(int64) error) ([]byte, error) {
		if err := write(90); err != nil {
			return nil, err
		}
		return nil, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want fn's error", err)
	}
	if got := lastToken(t, s, "r"); got != 3 {
		t.Fatalf("last token = %d after a failed fn, want 3 (the advance must roll back)", got)
	}
	value, seq, _, err := s.Data(ctx, "r")
	must(t, err)
	if value != 30 || seq != 1 {
		t.Fatalf("data = %d (seq %d) after a failed fn, want 30 (seq 1)", value, seq)
	}
	// The failed op left no record: a retry applies it.
	var calls int
	_, replayed, err := s.Do(ctx, Op{Resource: "r", Token: 9, ID: "op-2"}, func(write func(int64) error) ([]byte, error) {
		calls++
		return nil, write(90)
	})
	must(t, err)
	if replayed || calls != 1 {
		t.Fatalf("retry of a failed op: replayed=%v calls=%d, want a fresh apply", replayed, calls)
	}
	if got := lastToken(t, s, "r"); got != 9 {
		t.Fatalf("last token = %d, want 9", got)
	}
}

func testRepeatedOp(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	var calls int
	fn := func(write func(int64) error) ([]byte, error) {
		calls++
		return []byte("stock=8"), write(8)
	}
	op := Op{Resource: "sku-42", Token: 2, ID: "b-write-1", Payload: []byte("qty=8")}
	res, replayed, err := s.Do(ctx, op, fn)
	must(t, err)
	if string(res) != "stock=8" || replayed {
		t.Fatalf("first Do = %q replayed=%v", res, replayed)
	}
	for i := 0; i < 3; i++ {
		res, replayed, err = s.Do(ctx, op, fn)
		must(t, err)
		if string(res) != "stock=8" || !replayed {
			t.Fatalf("retry %d = %q replayed=%v, want the saved result replayed", i, res, replayed)
		}
	}
	if calls != 1 {
		t.Fatalf("fn called %d times, want 1", calls)
	}
	if seq := dataSeq(t, s, "sku-42"); seq != 1 {
		t.Fatalf("data row written %d times, want 1", seq)
	}
	if n := opCount(t, s); n != 1 {
		t.Fatalf("op records = %d, want 1", n)
	}
}

func testReplayAfterNewer(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	op := Op{Resource: "r", Token: 1, ID: "a-1", Payload: []byte("p")}
	var calls int
	fn := func(write func(int64) error) ([]byte, error) { calls++; return []byte("done"), write(1) }
	_, _, err := s.Do(ctx, op, fn)
	must(t, err)
	must(t, s.Check(ctx, "r", 2)) // a newer owner took over
	res, replayed, err := s.Do(ctx, op, fn)
	if err != nil || !replayed || string(res) != "done" || calls != 1 {
		t.Fatalf("retry after newer token: %q replayed=%v err=%v calls=%d; want the saved result", res, replayed, err, calls)
	}
	if got := lastToken(t, s, "r"); got != 2 {
		t.Fatalf("last token = %d, want 2", got)
	}
}

func testConflictingPayload(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	_, _, err := s.Do(ctx, Op{Resource: "r", Token: 1, ID: "op", Payload: []byte("qty=8")}, noop)
	must(t, err)
	var called bool
	_, _, err = s.Do(ctx, Op{Resource: "r", Token: 1, ID: "op", Payload: []byte("qty=9")}, func(func(int64) error) ([]byte, error) {
		called = true
		return nil, nil
	})
	var conflict *fence.OpConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, fence.ErrOpConflict) || conflict.Field != "op_id" || conflict.ID != "op" {
		t.Fatalf("err = %v, want *fence.OpConflictError{op_id, op}", err)
	}
	if called {
		t.Fatal("fn was called for a conflicting op")
	}
	// The same op_id on another resource is another op.
	_, replayed, err := s.Do(ctx, Op{Resource: "r2", Token: 1, ID: "op", Payload: []byte("qty=9")}, noop)
	if err != nil || replayed {
		t.Fatalf("same op_id on another resource: replayed=%v err=%v", replayed, err)
	}
}

func testStaleNewOp(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	must(t, s.Check(ctx, "r", 5))
	var called bool
	_, _, err := s.Do(ctx, Op{Resource: "r", Token: 4, ID: "late"}, func(func(int64) error) ([]byte, error) {
		called = true
		return nil, nil
	})
	wantStale(t, err, "r", 4, 5)
	if called {
		t.Fatal("fn was called with a stale token")
	}
	if n := opCount(t, s); n != 0 {
		t.Fatalf("op records = %d after a stale op, want 0", n)
	}
}

func testConcurrentSameOp(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	const n = 8
	var calls atomic.Int32
	var wg sync.WaitGroup
	type out struct {
		res      string
		replayed bool
		err      error
	}
	outs := make([]out, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, replayed, err := s.Do(ctx, Op{Resource: "r", Token: 7, ID: "same", Payload: []byte("x")}, func(write func(int64) error) ([]byte, error) {
				calls.Add(1)
				return []byte("applied"), write(70)
			})
			outs[i] = out{string(res), replayed, err}
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i, o := range outs {
		if o.err != nil || o.res != "applied" {
			t.Errorf("caller %d: %q err=%v", i, o.res, o.err)
		}
		if !o.replayed {
			fresh++
		}
	}
	if calls.Load() != 1 || fresh != 1 {
		t.Fatalf("fn called %d times, %d callers saw a fresh apply; want 1 and 1", calls.Load(), fresh)
	}
	if seq := dataSeq(t, s, "r"); seq != 1 {
		t.Fatalf("data row written %d times, want 1", seq)
	}
}

func testColumnPattern(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	must(t, s.StockInsert(ctx, "sku-42"))
	must(t, s.StockWrite(ctx, "sku-42", 2, 8))
	wantStale(t, s.StockWrite(ctx, "sku-42", 1, 5), "sku-42", 1, 2)
	must(t, s.StockWrite(ctx, "sku-42", 2, 9)) // equal token
	qty, tok, err := s.Stock(ctx, "sku-42")
	must(t, err)
	if qty != 9 || tok != 2 {
		t.Fatalf("stock = %d (token %d), want 9 (token 2)", qty, tok)
	}
	if err := s.StockWrite(ctx, "no-such-sku", 3, 1); !errors.Is(err, sqlguard.ErrNoRow) {
		t.Fatalf("missing row: err = %v, want ErrNoRow", err)
	}
}

func testMaxToken(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	if max, err := s.MaxToken(ctx); err != nil || max != 0 {
		t.Fatalf("empty MaxToken = %d, %v; want 0", max, err)
	}
	must(t, s.Check(ctx, "a", 3))
	must(t, s.Check(ctx, "b", 9))
	must(t, s.Check(ctx, "c", 5))
	wantStale(t, s.Check(ctx, "b", 4), "b", 4, 9) // refused; changes nothing
	if max, err := s.MaxToken(ctx); err != nil || max != 9 {
		t.Fatalf("MaxToken = %d, %v; want 9", max, err)
	}
}

func testPrune(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{PruneEvery: -1})
	ctx := context.Background()
	for _, id := range []string{"op-1", "op-2", "op-3"} {
		_, _, err := s.Do(ctx, Op{Resource: "r", Token: 1, ID: id}, noop)
		must(t, err)
	}
	if n, err := s.Prune(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("Prune(1h) of fresh records removed %d, %v; want 0", n, err)
	}
	must(t, s.AgeOps(ctx, 2*time.Hour))
	if n, err := s.Prune(ctx, time.Hour); err != nil || n != 3 {
		t.Fatalf("Prune(1h) of 2h-old records removed %d, %v; want 3", n, err)
	}
	// The documented consequence: a retry after pruning applies again.
	var calls int
	_, replayed, err := s.Do(ctx, Op{Resource: "r", Token: 1, ID: "op-1"}, func(func(int64) error) ([]byte, error) { calls++; return nil, nil })
	if err != nil || replayed || calls != 1 {
		t.Fatalf("retry of a pruned op: replayed=%v calls=%d err=%v; want a fresh apply", replayed, calls, err)
	}
}

func testDoPrunes(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{PruneEvery: 2})
	ctx := context.Background()
	do := func(res, id string) {
		t.Helper()
		_, _, err := s.Do(ctx, Op{Resource: res, Token: 1, ID: id}, noop)
		must(t, err)
	}
	do("r", "op-1") // call 1: prunes (nothing old yet)
	do("other", "op-x")
	must(t, s.AgeOps(ctx, 48*time.Hour)) // older than the default 24h retention
	do("r", "op-2")                      // call 3: prunes r's old records, not other's
	if n := opCount(t, s); n != 2 {
		t.Fatalf("op records = %d, want 2 (op-x of the other resource, and op-2)", n)
	}
	do("r", "op-3") // call 4: does not prune
	if n := opCount(t, s); n != 3 {
		t.Fatalf("op records = %d, want 3", n)
	}
}
