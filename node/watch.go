package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fenceworks/fence/state"
)

// The watch hub (Node.Watch) follows the changes of locks as the FSM
// applies them. Apply appends each command's state.Result.Changes to a
// bounded ring under the hub's short lock and wakes the watchers by
// closing one channel; it does no work per watcher and never waits for
// one. Each watcher reads the ring at its own cursor, on its caller's
// goroutine (Watch.Next). A watcher whose cursor the ring has moved past
// (it read more slowly than changes came) is cut: Next returns
// ErrWatchBehind, and the caller ends its stream. So a watcher that stops
// reading costs the grants nothing: apply never sees it.
//
// Every change has a position (WatchPos) that is the same on every
// replica: the raft index of its entry, the command's place in the entry
// (a group entry carries several; groupcodec.go) and the change's place
// in the command's Result.Changes. A client may resume against any node.

// DefaultWatchHistory is how many changes the watch ring holds by default
// (Config.WatchHistory).
const DefaultWatchHistory = 16384

// watchBatch bounds the changes one Next copies out of the ring.
const watchBatch = 512

// WatchPos is the position of one change in the log: the raft index of
// its entry, the command's place in the entry and the change's place in
// the command's changes. A position whose Cmd and Change are
// math.MaxUint32 is the end of entry Index (where a state read after it
// stands): "Index" in text, "Index.Cmd.Change" otherwise.
type WatchPos struct {
	Index  uint64
	Cmd    uint32
	Change uint32
}

// EndOf is the position after every change of entry index.
func EndOf(index uint64) WatchPos {
	return WatchPos{Index: index, Cmd: math.MaxUint32, Change: math.MaxUint32}
}

// Less reports whether p comes before q.
func (p WatchPos) Less(q WatchPos) bool {
	if p.Index != q.Index {
		return p.Index < q.Index
	}
	if p.Cmd != q.Cmd {
		return p.Cmd < q.Cmd
	}
	return p.Change < q.Change
}

// String is "index.cmd.change", or "index" for the end of an entry.
func (p WatchPos) String() string {
	if p.Cmd == math.MaxUint32 && p.Change == math.MaxUint32 {
		return strconv.FormatUint(p.Index, 10)
	}
	return fmt.Sprintf("%d.%d.%d", p.Index, p.Cmd, p.Change)
}

// ParseWatchPos parses a position as String writes it ("12" is the end of
// entry 12; "12.0.3" one change).
func ParseWatchPos(s string) (WatchPos, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 1 && len(parts) != 3 {
		return WatchPos{}, fmt.Errorf("a position is INDEX or INDEX.CMD.CHANGE (decimal), got %q", s)
	}
	i, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil {
		return WatchPos{}, fmt.Errorf("a position is INDEX or INDEX.CMD.CHANGE (decimal), got %q", s)
	}
	if len(parts) == 1 {
		return EndOf(i), nil
	}
	c, err1 := strconv.ParseUint(parts[1], 10, 32)
	k, err2 := strconv.ParseUint(parts[2], 10, 32)
	if err1 != nil || err2 != nil {
		return WatchPos{}, fmt.Errorf("a position is INDEX or INDEX.CMD.CHANGE (decimal), got %q", s)
	}
	return WatchPos{Index: i, Cmd: uint32(c), Change: uint32(k)}, nil
}

// WatchEvent is one item of a watch: a change at its position, or (State
// set) the state of the watched locks at position Pos.
type WatchEvent struct {
	Pos    WatchPos
	Change state.Change
	State  *WatchState
	// Share is what every watch this change goes to shares (its
	// encodings, made once by the first watch that needs each): set on
	// the change in the ring when some watch covers it, nil on a state.
	Share *WatchShare
}

// WatchShareSlots is how many encodings of one change a WatchShare holds.
const WatchShareSlots = 8

// WatchShare holds the encodings of one change, shared by every watch it
// goes to, so that 100 watches of one prefix encode each change once per
// form instead of 100 times. The slot is the caller's: one per wire
// format and per way of showing the change (a change shown redacted to a
// principal that is not its own is another slot). A slot, once stored,
// is immutable: a reader must not change the bytes. Safe for concurrent
// use; a nil *WatchShare holds nothing and stores nothing.
type WatchShare struct {
	slots [WatchShareSlots]atomic.Pointer[[]byte]
}

// Load returns slot's encoding, nil if none was stored.
func (s *WatchShare) Load(slot int) []byte {
	if s == nil || slot < 0 || slot >= WatchShareSlots {
		return nil
	}
	if b := s.slots[slot].Load(); b != nil {
		return *b
	}
	return nil
}

// Store keeps b as slot's encoding (the first store wins; b must not be
// changed after).
func (s *WatchShare) Store(slot int, b []byte) {
	if s == nil || slot < 0 || slot >= WatchShareSlots {
		return
	}
	s.slots[slot].CompareAndSwap(nil, &b)
}

// WatchState is one page of the state of the watched locks where a
// watch's live changes begin: at its start, or when the history it asked
// for is gone. A state of more than WatchPageLocks locks comes in pages,
// each read at its own position (the event's Pos) so that no read of the
// state holds up applies for long nor holds more than a page in memory:
// page k lists the locks after the last name of page k-1, as they stand at
// its Pos. Between two pages come the changes of the locks already
// listed (each after the page that listed its lock); a change of a lock not
// listed yet is not sent, its page shows it. So each lock's state and its
// changes after it are exact, and after the last page (More false) the
// state plus the changes received is the state at that page's position.
type WatchState struct {
	// Locks are the held or queued locks of this page, sorted by name
	// (state.Machine.LocksHeldPage at Now: as the machine holds them, a
	// lease whose end is not applied yet still listed).
	Locks []state.LockInfo
	// Now is the server time of the page (the machine's own, the same
	// on every replica at this position): Remaining is as of it.
	Now int64
	// HistoryGone: the watch asked to resume after a position whose
	// following changes this node no longer holds (older than its ring,
	// from before its last restart or snapshot install); it gets this
	// state instead.
	HistoryGone bool
	// Page is the page's place in its state (0: the first; a new state
	// begins at 0); More: pages of this state follow.
	Page uint32
	More bool
}

// WatchPageLocks bounds the locks of one page of a watch's state.
const WatchPageLocks = 256

// ErrWatchBehind: the watcher read more slowly than changes came and the
// ring moved past its cursor; it is cut. Resuming from its last position
// gets the history if still held, else the current state.
var ErrWatchBehind = errors.New("watch fell behind: the ring of recent changes (--watch-history) moved past it")

// WatchRequest is what a watch follows: one lock (Name) or every lock
// whose name starts with Prefix ("" and no Name: every lock), from After
// if set (a resume), else from the current state.
type WatchRequest struct {
	Prefix string
	Name   string
	After  *WatchPos
}

func (r WatchRequest) covers(name string) bool {
	if r.Name != "" {
		return name == r.Name
	}
	return strings.HasPrefix(name, r.Prefix)
}

// watchGroup is the watchers of one name or one prefix: a change of a
// lock it covers wakes them all by closing wake, once per applied batch.
type watchGroup struct {
	wake   chan struct{}
	n      int    // its open watches
	marked bool   // to wake at the end of the batch being applied
	wakes  uint64 // times woken (tests)
}

// watchHub is the ring of recent changes.
type watchHub struct {
	mu   sync.Mutex
	ring []WatchEvent // ring[s%len(ring)] holds the change of sequence s, first <= s < next
	// first and next are the sequence numbers of the oldest held change
	// and of the next one.
	first, next uint64
	// horizon: every change after it up to last is held (the position of
	// the last change dropped, or where the hub started).
	horizon WatchPos
	// last is the end of the last entry applied.
	last WatchPos
	// resetting: a snapshot was restored and no entry applied since: the
	// position of the state is not known yet (Watch waits for the next
	// entry); epoch counts restores (a watcher of an older one gets the
	// state again, its history gone).
	resetting bool
	epoch     uint64
	wake      chan struct{} // closed and replaced when a restore resets the hub or its position becomes known

	// The watchers, grouped by what they watch, so that an apply wakes
	// only those whose name or prefix one of its changes covers: by exact
	// name, and by prefix, with the distinct prefix lengths in use (a
	// change of name N looks up N[:l] for each: O(distinct lengths), not
	// O(watchers)). toWake: the groups a batch being applied covers.
	byName   map[string]*watchGroup
	byPrefix map[string]*watchGroup
	lens     []int // distinct len(prefix) of byPrefix, ascending
	toWake   []*watchGroup
	page     int // locks per state page (WatchPageLocks; tests lower it)

	// pagers: one token per watch reading a page of its state (watchPagers
	// of them at once; the others wait for a slot, before taking the
	// FSM's read lock). Hundreds of watches reading and encoding pages at
	// once starved the grants (an outside test: 200 idle SSE watches of a
	// 60,000-lock prefix took grant p50 from 1.5 ms to 200-900 ms).
	// pagersBusy, pagersWaiting and pageHook are for tests.
	pagers        chan struct{}
	pagersBusy    atomic.Int64
	pagersWaiting atomic.Int64
	pageHook      func()

	watchers atomic.Int64
}

// watchPagers is how many watches read pages of their state at once:
// half the CPUs, at least one.
func watchPagers() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// takePager waits for a pager slot (or ctx's end); the caller calls
// putPager once its page is read. Never called with the FSM's lock held.
func (h *watchHub) takePager(ctx context.Context) error {
	select {
	case h.pagers <- struct{}{}:
	default:
		h.pagersWaiting.Add(1)
		select {
		case h.pagers <- struct{}{}:
			h.pagersWaiting.Add(-1)
		case <-ctx.Done():
			h.pagersWaiting.Add(-1)
			return ctx.Err()
		}
	}
	h.pagersBusy.Add(1)
	if h.pageHook != nil {
		h.pageHook()
	}
	return nil
}

func (h *watchHub) putPager() {
	h.pagersBusy.Add(-1)
	<-h.pagers
}

func newWatchHub(size int) *watchHub {
	if size <= 0 {
		size = DefaultWatchHistory
	}
	return &watchHub{ring: make([]WatchEvent, size), wake: make(chan struct{}),
		byName: map[string]*watchGroup{}, byPrefix: map[string]*watchGroup{}, page: WatchPageLocks,
		pagers: make(chan struct{}, watchPagers())}
}

// join adds a watcher of r to its group (hub lock held).
func (h *watchHub) join(r WatchRequest) *watchGroup {
	groups, key := h.byPrefix, r.Prefix
	if r.Name != "" {
		groups, key = h.byName, r.Name
	}
	g := groups[key]
	if g == nil {
		g = &watchGroup{wake: make(chan struct{})}
		groups[key] = g
		if r.Name == "" {
			i, found := slices.BinarySearch(h.lens, len(key))
			if !found {
				h.lens = slices.Insert(h.lens, i, len(key))
			}
		}
	}
	g.n++
	return g
}

// leave removes a watcher of r from its group g (hub lock held).
func (h *watchHub) leave(r WatchRequest, g *watchGroup) {
	g.n--
	if g.n > 0 {
		return
	}
	if r.Name != "" {
		delete(h.byName, r.Name)
		return
	}
	delete(h.byPrefix, r.Prefix)
	for p := range h.byPrefix {
		if len(p) == len(r.Prefix) {
			return // the length is still in use
		}
	}
	if i, found := slices.BinarySearch(h.lens, len(r.Prefix)); found {
		h.lens = slices.Delete(h.lens, i, i+1)
	}
}

// mark marks the groups a change of lock name covers, to wake at the end
// of the batch (hub lock held), and reports whether one does.
func (h *watchHub) mark(name string) bool {
	covered := false
	if g := h.byName[name]; g != nil {
		covered = true
		if !g.marked {
			g.marked = true
			h.toWake = append(h.toWake, g)
		}
	}
	for _, l := range h.lens {
		if l > len(name) {
			break
		}
		if g := h.byPrefix[name[:l]]; g != nil {
			covered = true
			if !g.marked {
				g.marked = true
				h.toWake = append(h.toWake, g)
			}
		}
	}
	return covered
}

// add appends the changes of the command at (index, cmd). Called by the
// FSM under its write lock, hub lock held (begin/end).
func (h *watchHub) add(index uint64, cmd int, cs []state.Change) {
	n := uint64(len(h.ring))
	for k := range cs {
		if h.next-h.first == n {
			h.horizon = h.ring[h.first%n].Pos
			h.ring[h.first%n] = WatchEvent{}
			h.first++
		}
		e := WatchEvent{Pos: WatchPos{Index: index, Cmd: uint32(cmd), Change: uint32(k)}, Change: cs[k]}
		if h.mark(cs[k].Name) {
			// Watches cover it: they share its encodings. A watch
			// resuming later from the ring finds none (encodes its own).
			e.Share = &WatchShare{}
		}
		h.ring[h.next%n] = e
		h.next++
	}
}

// applied records the end of a batch of entries, first..last (under the
// FSM's write lock), and wakes the watchers its changes cover.
func (h *watchHub) applied(first, last uint64) {
	if h.resetting {
		h.resetting = false
		h.horizon = EndOf(first - 1)
		close(h.wake)
		h.wake = make(chan struct{})
	}
	h.last = EndOf(last)
	for _, g := range h.toWake {
		g.wakeUp()
	}
	clear(h.toWake)
	h.toWake = h.toWake[:0]
}

func (g *watchGroup) wakeUp() {
	close(g.wake)
	g.wake = make(chan struct{})
	g.marked = false
	g.wakes++
}

// reset drops the history (a snapshot was restored; under the FSM's
// write lock) and wakes every watcher.
func (h *watchHub) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.ring)
	h.first = h.next
	h.resetting = true
	h.epoch++
	close(h.wake)
	h.wake = make(chan struct{})
	for _, g := range h.byName {
		g.wakeUp()
	}
	for _, g := range h.byPrefix {
		g.wakeUp()
	}
	clear(h.toWake)
	h.toWake = h.toWake[:0]
}

// Watch follows one watch's changes (Node.Watch). Not safe for concurrent
// use; Close it when done.
type Watch struct {
	f      *fsm
	h      *watchHub
	g      *watchGroup // its group in the hub (wakes it)
	req    WatchRequest
	cursor uint64
	epoch  uint64
	after  WatchPos // changes at or before it are skipped (a resume from a position this node has not applied yet)
	start  *WatchEvent
	closed bool
	// foreign: the watch asked to resume after a position past this node's
	// log (Node.Watch): it starts from the state, history gone.
	foreign bool
	// The state being sent in pages: paging while pages remain; listed is
	// the last name of the pages sent (changes of locks after it are not
	// sent: a later page shows them); page is the next page's number.
	paging      bool
	listed      string
	page        uint32
	historyGone bool
}

// Watch starts a watch of the locks r covers on this node's applied
// state (any node, leader or follower: positions are the same on every
// replica). Without r.After the first events are the current state (in
// pages, WatchState); with it, the changes after r.After, or, when this
// node no longer holds them, the current state with HistoryGone.
func (n *Node) Watch(ctx context.Context, r WatchRequest) (*Watch, error) {
	w := &Watch{f: n.fsm, h: n.fsm.hub, req: r}
	if a := r.After; a != nil && a.Index > n.raft.LastIndex() {
		// A position past this node's log: not one this history made
		// (a restore renumbers the log from an older index; a position
		// may be made up). Its changes cannot be told apart from this
		// history's: the watch starts from the state, history gone,
		// instead of waiting silently for an index that means something
		// else here (an outside test resumed after a restore and got
		// nothing). A follower that lags holds the entries in its log:
		// it still resumes.
		w.foreign = true
	}
	if err := w.begin(ctx, r.After); err != nil {
		return nil, err
	}
	w.h.mu.Lock()
	w.g = w.h.join(r)
	w.h.mu.Unlock()
	w.h.watchers.Add(1)
	return w, nil
}

// Watchers is the number of open watches on this node.
func (n *Node) Watchers() int64 { return n.fsm.hub.watchers.Load() }

// begin places the watch: at after if the ring holds what follows it,
// else at the current state (its first page, read with a pager slot). It waits while a restored
// snapshot's position is not known.
func (w *Watch) begin(ctx context.Context, after *WatchPos) error {
	if err := w.h.takePager(ctx); err != nil {
		return err
	}
	defer w.h.putPager()
	for {
		w.f.mu.RLock()
		w.h.mu.Lock()
		if w.h.resetting {
			wake := w.h.wake
			w.h.mu.Unlock()
			w.f.mu.RUnlock()
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		w.epoch = w.h.epoch
		if after != nil && !w.foreign && !after.Less(w.h.horizon) {
			// The first held change after it.
			held := int(w.h.next - w.h.first)
			n := uint64(len(w.h.ring))
			i := sort.Search(held, func(i int) bool {
				return after.Less(w.h.ring[(w.h.first+uint64(i))%n].Pos)
			})
			w.cursor = w.h.first + uint64(i)
			w.after = *after
			w.start = nil
			w.paging = false
		} else {
			w.paging, w.listed, w.page, w.historyGone = true, "", 0, after != nil
			w.cursor = w.h.next
			w.after = w.h.last
			w.start = w.readPage()
		}
		w.h.mu.Unlock()
		w.f.mu.RUnlock()
		return nil
	}
}

// readPage reads the next page of the state at the hub's last position
// (FSM read lock and hub lock held, the cursor at the ring's end: every
// change up to this position has been looked at).
func (w *Watch) readPage() *WatchEvent {
	now := w.f.m.Now()
	var locks []state.LockInfo
	more := false
	if w.req.Name != "" {
		if li := w.f.m.LockHeld(w.req.Name, now); !li.Free {
			locks = []state.LockInfo{li}
		}
	} else {
		var next string
		locks, next = w.f.m.LocksHeldPage(w.req.Prefix, w.listed, w.h.page, now)
		more = next != ""
		w.listed = next
	}
	e := &WatchEvent{Pos: w.h.last, State: &WatchState{Locks: locks, Now: now, HistoryGone: w.historyGone, Page: w.page, More: more}}
	w.page++
	w.paging = more
	w.after = w.h.last
	return e
}

// wants reports whether the watch sends change e.
func (w *Watch) wants(e *WatchEvent) bool {
	if !w.req.covers(e.Change.Name) || !w.after.Less(e.Pos) {
		return false
	}
	// While the state comes in pages, a lock not listed yet: its page,
	// read later, shows this change.
	return !w.paging || e.Change.Name <= w.listed
}

// scan appends the wanted changes of the ring from the cursor, at most
// watchBatch of them looked at (hub lock held); more: the ring holds
// more after them.
func (w *Watch) scan(buf []WatchEvent) ([]WatchEvent, bool) {
	n := uint64(len(w.h.ring))
	end := min(w.h.next, w.cursor+watchBatch)
	for s := w.cursor; s < end; s++ {
		if e := &w.h.ring[s%n]; w.wants(e) {
			buf = append(buf, *e)
		}
	}
	w.cursor = end
	return buf, end < w.h.next
}

// Next returns the next events: the state (first, when the watch starts
// with one, in pages), then changes of the watched locks in log order,
// each once. It waits until there is one or ctx ends. ErrWatchBehind: the
// watch was cut. A snapshot installed on this node (its history dropped)
// gives the state again, HistoryGone set.
func (w *Watch) Next(ctx context.Context, buf []WatchEvent) ([]WatchEvent, error) {
	buf = buf[:0]
	for {
		if w.start != nil {
			buf = append(buf, *w.start)
			w.start = nil
			return buf, nil
		}
		w.h.mu.Lock()
		if w.epoch != w.h.epoch {
			w.h.mu.Unlock()
			if err := w.begin(ctx, nil); err != nil {
				return buf, err
			}
			w.start.State.HistoryGone = true
			w.historyGone = true
			continue
		}
		if w.cursor < w.h.first {
			w.h.mu.Unlock()
			return buf, ErrWatchBehind
		}
		var more bool
		buf, more = w.scan(buf)
		wake := w.g.wake
		w.h.mu.Unlock()
		if len(buf) > 0 {
			return buf, nil
		}
		if more {
			continue // read more of the ring
		}
		if w.paging {
			if buf, err := w.nextPage(ctx, buf); err != nil || len(buf) > 0 {
				return buf, err
			}
			continue // a restore came between: the state starts again
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return buf, ctx.Err()
		}
	}
}

// nextPage reads the state's next page under the FSM's read lock (with a
// pager slot: at most watchPagers watches read pages at once), after
// the changes the ring got since the cursor (their wanted ones first).
func (w *Watch) nextPage(ctx context.Context, buf []WatchEvent) ([]WatchEvent, error) {
	if err := w.h.takePager(ctx); err != nil {
		return buf, err
	}
	defer w.h.putPager()
	w.f.mu.RLock()
	defer w.f.mu.RUnlock()
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	if w.epoch != w.h.epoch {
		return buf, nil // Next starts again
	}
	if w.cursor < w.h.first {
		return buf, ErrWatchBehind
	}
	for more := true; more; {
		buf, more = w.scan(buf)
	}
	return append(buf, *w.readPage()), nil
}

// Close ends the watch.
func (w *Watch) Close() {
	if !w.closed {
		w.closed = true
		w.h.mu.Lock()
		w.h.leave(w.req, w.g)
		w.h.mu.Unlock()
		w.h.watchers.Add(-1)
	}
}
