package redisguard

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/fenceworks/fence"
)

// 32 goroutines hammer one resource with interleaved newer and older tokens.
// Every accepted write gets a version from the script; ordered by version,
// the accepted tokens never go down, every refusal names a newer token, and
// the final state is the last accepted write.
func TestConcurrentWritersNeverRegress(t *testing.T) {
	g, _ := newTestGuard(t, Options{})
	const workers, writes = 32, 40
	type accepted struct {
		token   fence.Token
		version int64
		value   string
	}
	var (
		mu      sync.Mutex
		history []accepted
		refused int
		wg      sync.WaitGroup
		errs    = make(chan error, workers)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < writes; i++ {
				// Tokens climb with i, but odd workers lag far behind and
				// every third write reaches back: newer and older interleave.
				tok := fence.Token(1 + i*8 + w%8)
				if w%2 == 1 {
					tok = fence.Token(1 + max(0, i-10)*8 + w%8)
				}
				if i%3 == 2 {
					tok = fence.Token(1 + (i/2)*4)
				}
				val := fmt.Sprintf("w%d-i%d-t%d", w, i, tok)
				op := ""
				if i%5 == 0 {
					op = val
				}
				r, err := g.Set(ctx, "hot", tok, []byte(val), op)
				var stale *fence.StaleTokenError
				switch {
				case err == nil:
					mu.Lock()
					history = append(history, accepted{tok, r.Version, val})
					mu.Unlock()
				case errors.As(err, &stale):
					if stale.LastAccepted <= tok {
						errs <- fmt.Errorf("refused token %d although last accepted was %d", tok, stale.LastAccepted)
						return
					}
					mu.Lock()
					refused++
					mu.Unlock()
				default:
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sort.Slice(history, func(i, j int) bool { return history[i].version < history[j].version })
	var maxTok fence.Token
	for i, h := range history {
		if h.version != int64(i+1) {
			t.Fatalf("versions not a gapless sequence: position %d has version %d", i, h.version)
		}
		if h.token < maxTok {
			t.Fatalf("version %d accepted token %d after token %d had been accepted", h.version, h.token, maxTok)
		}
		maxTok = h.token
	}
	if refused == 0 || len(history) == 0 {
		t.Fatalf("the interleaving did not exercise both outcomes: %d accepted, %d refused", len(history), refused)
	}
	last := history[len(history)-1]
	wantState(t, g, "hot", last.value, maxTok, last.version)
	t.Logf("%d accepted, %d refused, final token %d", len(history), refused, maxTok)
}
