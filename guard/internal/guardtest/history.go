package guardtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/fenceworks/fence"
)

// History test bounds: 32 writers × 20 guarded writes on one resource.
const (
	historyWorkers = 32
	historyOps     = 20
)

// attempt is one guarded write of the history.
type attempt struct {
	worker   int
	token    fence.Token
	accepted bool
	seq      int64       // commit order of an accepted write (the data row's seq)
	last     fence.Token // LastAccepted of a refusal
}

// testConcurrentHistory: writers with interleaved newer and older tokens
// hammer one resource, each doing Check + a write of its token into the
// data row in one transaction. The data row's seq, incremented by every
// accepted write under the guard row lock, gives the commit order. Checked:
// in commit order the accepted tokens never decrease (no older write
// accepted after a newer one committed); every refusal names a token that
// was accepted and is newer; the final guard token is the largest accepted
// and the data row holds the value that token wrote.
func testConcurrentHistory(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	// Tokens drawn before the goroutines start: worker w's i-th token lies in
	// a window that moves up with i and overlaps its neighbours, so older and
	// newer tokens (and equal ones) interleave across workers.
	rng := rand.New(rand.NewPCG(1, 2))
	plan := make([][]fence.Token, historyWorkers)
	for w := range plan {
		plan[w] = make([]fence.Token, historyOps)
		for i := range plan[w] {
			plan[w][i] = fence.Token(1 + i*4 + rng.IntN(12))
		}
	}
	var (
		mu      sync.Mutex
		history []attempt
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for w := range historyWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for _, tok := range plan[w] {
				a := attempt{worker: w, token: tok}
				seq, err := s.GuardedWrite(ctx, "hot", tok, int64(tok))
				var stale *fence.StaleTokenError
				switch {
				case err == nil:
					a.accepted, a.seq = true, seq
				case errors.As(err, &stale):
					a.last = stale.LastAccepted
				default:
					t.Errorf("worker %d token %d: %v", w, tok, err)
					return
				}
				mu.Lock()
				history = append(history, a)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	checkHistory(t, s, history)
}

func checkHistory(t *testing.T, s Store, history []attempt) {
	t.Helper()
	var accepted []attempt
	acceptedTokens := map[fence.Token]bool{}
	for _, a := range history {
		if a.accepted {
			accepted = append(accepted, a)
			acceptedTokens[a.token] = true
		}
	}
	if len(accepted) == 0 || len(accepted) == len(history) {
		t.Fatalf("%d of %d writes accepted: the history does not exercise both outcomes", len(accepted), len(history))
	}
	slices.SortFunc(accepted, func(a, b attempt) int { return int(a.seq - b.seq) })
	var max fence.Token
	for i, a := range accepted {
		if a.seq != int64(i+1) {
			t.Fatalf("accepted write %d has seq %d: commit order has a gap or a duplicate", i+1, a.seq)
		}
		if a.token < max {
			t.Fatalf("commit %d accepted token %d after token %d had committed", a.seq, a.token, max)
		}
		max = a.token
	}
	for _, a := range history {
		if a.accepted {
			continue
		}
		if a.last <= a.token || !acceptedTokens[a.last] {
			t.Fatalf("token %d refused citing last accepted %d: not a newer accepted token", a.token, a.last)
		}
	}
	if got := lastToken(t, s, "hot"); got != max {
		t.Fatalf("final guard token %d, want the largest accepted %d", got, max)
	}
	value, seq, _, err := s.Data(context.Background(), "hot")
	must(t, err)
	if fence.Token(value) != max || seq != int64(len(accepted)) {
		t.Fatalf("data row = %d (seq %d), want %d written by the largest token (seq %d)", value, seq, max, len(accepted))
	}
	t.Logf("%d writes: %d accepted, %d refused as stale; final token %d", len(history), len(accepted), len(history)-len(accepted), max)
}
