package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// pageRange is the names one page of a state covers: after the last name
// of the page before it, up to its own last name (the last page: all the
// rest), read at pos.
type pageRange struct {
	last string // "" for the last page
	pos  WatchPos
}

// A state of many locks comes in pages of at most the hub's page size,
// each read at its own position, with commands applied between every two
// pages (grants, releases, new locks, on names already listed and not):
// each lock is in exactly one page as it stood there, and the changes the
// watch gives after it are exactly the log's changes of that lock after
// that page's position, in log order, each once.
func TestWatchStateInPagesIsExactAsChangesComeBetweenPages(t *testing.T) {
	n := openWatchNode(t, t.TempDir(), 1<<16)
	n.fsm.hub.mu.Lock()
	n.fsm.hub.page = 16
	n.fsm.hub.mu.Unlock()
	tokens := map[string]fence.Token{}
	for i := range 200 {
		name := fmt.Sprintf("p/%03d", i*2) // odd names are left free, for new locks between pages
		tokens[name] = mustApply(t, n, acquire(name, time.Hour)).Lease.Token
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := n.Watch(ctx, WatchRequest{Prefix: "p/"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	churn := func() {
		for range 6 {
			name := fmt.Sprintf("p/%03d", rng.IntN(400))
			if tok, ok := tokens[name]; ok {
				mustApply(t, n, state.Command{Op: state.OpRelease, Name: name, Token: tok})
				delete(tokens, name)
			} else {
				tokens[name] = mustApply(t, n, acquire(name, time.Hour)).Lease.Token
			}
		}
	}
	var pages []pageRange
	listed := map[string]int{}      // lock -> its page
	got := map[string][]logChange{} // lock -> the changes the watch gave
	var lastPage WatchPos
	for done := false; !done; {
		evs, err := w.Next(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.State == nil {
				got[e.Change.Name] = append(got[e.Change.Name], logChange{e.Pos, e.Change})
				continue
			}
			if int(e.State.Page) != len(pages) {
				t.Fatalf("page %d after %d pages", e.State.Page, len(pages))
			}
			if len(e.State.Locks) > 16 {
				t.Fatalf("page %d has %d locks: more than a page", e.State.Page, len(e.State.Locks))
			}
			last := ""
			for _, l := range e.State.Locks {
				if _, ok := listed[l.Name]; ok {
					t.Fatalf("lock %s listed twice", l.Name)
				}
				listed[l.Name] = len(pages)
				last = l.Name
			}
			if !e.State.More {
				last = ""
				done = true
			}
			pages = append(pages, pageRange{last: last, pos: e.Pos})
			lastPage = e.Pos
			churn()
		}
	}
	if len(pages) < 10 {
		t.Fatalf("only %d pages", len(pages))
	}
	// The changes after the last page, up to a mark.
	mustApply(t, n, acquire("p/zz-end", time.Hour))
	for end := false; !end; {
		evs, err := w.Next(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.State != nil {
				t.Fatal("a second state")
			}
			got[e.Change.Name] = append(got[e.Change.Name], logChange{e.Pos, e.Change})
			end = e.Change.Name == "p/zz-end"
		}
	}
	log, _ := replayLog(t, n, "p/", nil)
	pageOf := func(name string) pageRange {
		for _, p := range pages {
			if p.last == "" || name <= p.last {
				return p
			}
		}
		t.Fatalf("no page covers %s", name)
		return pageRange{}
	}
	want := map[string][]logChange{}
	for _, c := range log {
		if len(c.c.Name) > 2 && c.c.Name[:2] == "p/" && pageOf(c.c.Name).pos.Less(c.pos) {
			want[c.c.Name] = append(want[c.c.Name], c)
		}
	}
	for name, ws := range want {
		gs := got[name]
		if len(gs) != len(ws) {
			t.Fatalf("lock %s (page at %s): the watch gave %d changes, the log has %d after its page", name, pageOf(name).pos, len(gs), len(ws))
		}
		for i := range ws {
			if gs[i].pos != ws[i].pos || gs[i].c != ws[i].c {
				t.Fatalf("lock %s: change %d is %s %+v; the log's is %s %+v", name, i, gs[i].pos, gs[i].c, ws[i].pos, ws[i].c)
			}
		}
	}
	for name := range got {
		if len(want[name]) == 0 {
			t.Fatalf("lock %s: the watch gave changes the log has not after its page", name)
		}
	}
	t.Logf("%d pages, the last at %s; %d locks listed", len(pages), lastPage, len(listed))
}

// 100 watches of a prefix of 64,512 held locks (1,008 sets of 64), each
// given its first event and then never read again, hold one page each,
// not the whole state: the heap grows by far less than one whole state per
// watch, every event is at most a page, and a grant still completes.
func TestWatchesThatNeverReadHoldAPageEach(t *testing.T) {
	n := openWatchNode(t, t.TempDir(), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	sets := make(chan int, 1008)
	for i := range 1008 {
		sets <- i
	}
	close(sets)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range sets {
				locks := make([]fence.LockSpec, 64)
				for j := range locks {
					locks[j] = fence.LockSpec{Name: fmt.Sprintf("big/%04d/%02d", i, j)}
				}
				res, err := n.Apply(ctx, state.Command{Op: state.OpAcquire, Owner: "o", TTL: time.Hour, Locks: locks})
				if err != nil || res.Err != nil {
					t.Error(err, res.Err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	allocated := func() uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.TotalAlloc
	}
	// One whole state, as the watch used to build it at its start: the
	// bytes built for it.
	n.fsm.mu.RLock()
	before := allocated()
	whole := len(n.fsm.m.Locks("big/", n.fsm.m.Now()))
	wholeBytes := allocated() - before
	n.fsm.mu.RUnlock()
	if whole != 64512 {
		t.Fatalf("%d locks held", whole)
	}
	base := heap()
	var firsts [][]WatchEvent
	for i := range 100 {
		w, err := n.Watch(ctx, WatchRequest{Prefix: "big/"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		evs, err := w.Next(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.State == nil || len(e.State.Locks) > WatchPageLocks || !e.State.More {
				t.Fatalf("first event: a state page of at most %d locks with more to come; got %d locks", WatchPageLocks, len(e.State.Locks))
			}
		}
		firsts = append(firsts, evs) // held, as a stream not read holds its event
		if grew := int64(heap()) - int64(base); grew > int64(wholeBytes) {
			t.Fatalf("%d watches that read one event grew the heap by %d bytes; one whole state is %d", i+1, grew, wholeBytes)
		}
	}
	grew := int64(heap()) - int64(base)
	mustApply(t, n, acquire("big/after", time.Minute))
	runtime.KeepAlive(firsts)
	t.Logf("one whole state %d bytes; 100 watches holding their first page grew the heap %d bytes", wholeBytes, grew)
}

// The pages of watches' states are read by at most watchPagers watches at
// once; the others wait for a slot (so hundreds of watches starting at
// once cannot starve the applies of CPU and of the FSM's lock), and a
// waiting watch whose context ends stops waiting.
func TestWatchStatePagesAreReadByAtMostWatchPagersAtOnce(t *testing.T) {
	n := openWatchNode(t, t.TempDir(), 1<<16)
	for i := range 40 {
		mustApply(t, n, acquire(fmt.Sprintf("p/%03d", i), time.Hour))
	}
	h := n.fsm.hub
	gate := make(chan struct{})
	h.pageHook = func() { <-gate }
	k := watchPagers()
	watchers := k + 4
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, watchers)
	for range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := n.Watch(ctx, WatchRequest{Prefix: "p/"})
			if err != nil {
				errs <- err
				return
			}
			defer w.Close()
			for {
				evs, err := w.Next(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				if st := evs[len(evs)-1].State; st != nil && !st.More {
					return
				}
			}
		}()
	}
	// Every watch is reading a page or waiting for a slot.
	for h.pagersBusy.Load()+h.pagersWaiting.Load() < int64(watchers) {
		if ctx.Err() != nil {
			t.Fatalf("watches never all reached the pagers: %d busy, %d waiting", h.pagersBusy.Load(), h.pagersWaiting.Load())
		}
		runtime.Gosched()
	}
	if busy := h.pagersBusy.Load(); busy > int64(k) {
		t.Fatalf("%d watches read pages at once, want at most %d (watchPagers)", busy, k)
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A watch waiting for a slot leaves when its context ends.
	for range k {
		h.pagers <- struct{}{}
	}
	wctx, wcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := n.Watch(wctx, WatchRequest{Prefix: "p/"})
		done <- err
	}()
	for h.pagersWaiting.Load() == 0 {
		runtime.Gosched()
	}
	wcancel()
	if err := <-done; err == nil {
		t.Fatal("a watch waiting for a pager slot started after its context ended")
	}
	for range k {
		<-h.pagers
	}
}
