package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// An answer for a proposal that was reused after its group took it (its
// caller gone, the struct pooled and handed to another call) is dropped and
// counted, never delivered to the new caller: the group records each
// proposal's generation when it takes it.
//
// Planted: answer without the generation check — caught (the reused
// proposal receives the stale answer).
func TestGroupAnswerSkipsReusedProposal(t *testing.T) {
	n := &Node{props: newProposer(1), cfg: Config{Logger: quietLogger()}}
	c := &leaderClock{}
	p := &proposal{c: c, data: []byte{1}, done: make(chan struct{}, 1), gen: 7}
	if lead, ok := n.props.enqueue(p); !lead || !ok {
		t.Fatalf("enqueue = %v, %v; want to lead", lead, ok)
	}
	g := n.props.take()
	if g == nil || len(g.m) != 1 || g.m[0].p != p {
		t.Fatal("take did not return the one proposal")
	}
	p.gen++ // the proposal is reused by another call
	n.answer(g, &groupResults{rs: []state.Result{{Lease: &fence.Lease{Name: "stale"}}}}, nil)
	select {
	case <-p.done:
		t.Fatalf("a reused proposal was answered with the stale result %+v", p.res)
	default:
	}
	if got := n.props.misrouted.Load(); got != 1 {
		t.Fatalf("misrouted = %d, want 1", got)
	}
}

// Proposals withdrawn from the queue (their contexts ended) go back to the
// pool and are reused by later calls while the group in flight is stuck;
// every call still gets exactly its own answer: its own lock's lease, or
// its context's error, and no answer is dropped as misrouted.
//
// Planted: withdraw reports success but leaves the proposal in the queue
// (so it is pooled while a group may still take it) — caught (the pooled
// proposal is taken twice: its second answer blocks the commit loop and
// the kept calls are never all answered: hang guard).
func TestGroupWithdrawnProposalsReusedSafely(t *testing.T) {
	n, gate := openGated(t, t.TempDir(), nil)
	commands0 := n.props.commands.Load()
	gate.close()
	front := applyAsync(n, context.Background(), acquire("front", time.Hour))
	untilQueued(t, n, commands0, 1)
	for n.props.commands.Load() == commands0 {
		time.Sleep(time.Millisecond) // front is in its group, stuck in the write
	}
	type outcome struct {
		name string
		res  state.Result
		err  error
	}
	const rounds, per = 4, 16
	out := make(chan outcome, rounds*per*2)
	var wg sync.WaitGroup
	call := func(ctx context.Context, name string) {
		defer wg.Done()
		res, err := n.Apply(ctx, acquire(name, time.Hour))
		out <- outcome{name, res, err}
	}
	queued := 1
	for r := range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		for i := range per {
			wg.Add(2)
			go call(ctx, fmt.Sprintf("gone-%d-%d", r, i))
			go call(context.Background(), fmt.Sprintf("kept-%d-%d", r, i))
		}
		queued += 2 * per
		untilQueued(t, n, commands0, queued)
		cancel() // the gone-* are withdrawn and pooled; the next round reuses them
		var gone []outcome
		if !within(t, "the withdrawn calls return", func() {
			for range per {
				gone = append(gone, <-out)
			}
		}) {
			t.FailNow()
		}
		for _, o := range gone {
			if o.name[:4] != "gone" || !errors.Is(o.err, context.Canceled) {
				t.Fatalf("%s answered %+v, %v while queued with its context cancelled", o.name, o.res, o.err)
			}
		}
		queued -= per
	}
	gate.open()
	recv(t, front)
	if !within(t, "every kept call answered", wg.Wait) {
		t.FailNow()
	}
	close(out)
	got := 0
	for o := range out {
		if o.err != nil || o.res.Err != nil || o.res.Lease == nil || o.res.Lease.Name != o.name {
			t.Fatalf("%s answered %+v, %v; want its own lease", o.name, o.res, o.err)
		}
		got++
	}
	if got != rounds*per {
		t.Fatalf("%d kept calls answered, want %d", got, rounds*per)
	}
	if m := n.props.misrouted.Load(); m != 0 {
		t.Fatalf("%d answers dropped as misrouted", m)
	}
}
