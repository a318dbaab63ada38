package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// labStore is where the lab's workers write the stock: the naive store
// accepts every write (a plain TTL lock, no token check); the fenced one is
// the server's ResourceService, which compares tokens.
type labStore interface {
	write(ctx context.Context, value int, token fence.Token) (string, error)
	read(ctx context.Context) (value string, lastToken fence.Token, err error)
}

// naiveStore is an in-memory variable: it has no idea who writes.
type naiveStore struct{ value int }

func (s *naiveStore) write(_ context.Context, v int, _ fence.Token) (string, error) {
	s.value = v
	return fmt.Sprintf("accepted: stock=%d", v), nil
}

func (s *naiveStore) read(context.Context) (string, fence.Token, error) {
	return fmt.Sprint(s.value), 0, nil
}

// fencedStore writes through the server's fenced ResourceService.
type fencedStore struct {
	c        *client.Client
	resource string
}

func (s *fencedStore) write(ctx context.Context, v int, token fence.Token) (string, error) {
	r, err := s.c.Write(ctx, s.resource, token, []byte(fmt.Sprint(v)))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("accepted: stock=%s last_token=%d", r.Value, r.LastToken), nil
}

func (s *fencedStore) read(ctx context.Context) (string, fence.Token, error) {
	r, err := s.c.Read(ctx, s.resource)
	return string(r.Value), r.LastToken, err
}

// labRun is what one play of the story's timeline observed.
type labRun struct {
	server         string // the URL it was played against
	where          string // how that server came to be (given, embedded)
	tokenA, tokenB fence.Token
	busyAt4        error         // B's try at t=4 (want *fence.BusyError)
	aLostAt        time.Duration // when A's client reported its lease lost (0: not by t=7)
	bWrite8        string        // B's write of 8 at t=6
	bWrite8Err     error
	aWrite5        string // A's late write of 5 at t=7
	aWrite5Err     error
	afterA         string // the stock after A's late write
	afterALast     fence.Token
	retry          string // the fenced run only: B's retry of its write of 8, same token
	retryErr       error
	final          string // the stock at the end
	finalLast      fence.Token
	err            error // the run could not be played (server unreachable, ...)
	// slipped says how the play fell off its timeline (empty: it kept
	// it): a step that ran so late that what the story expects of it no
	// longer follows — the machine too slow for the unit, not a verdict
	// on the server (see playStory).
	slipped string
}

// playStory plays the paused-worker story (docs/story.md) in real time,
// one story second = unit: A acquires with TTL 5 at t=0 and then stalls
// (no renewals: the pause); B tries at t=4; A's lease expires at t=5; B
// acquires at t=6 and writes 8; A wakes at t=7 and writes 5. With retry
// (the fenced run), B then repeats its write of 8 with the same token,
// which must be accepted: equal tokens are allowed. The naive run stops at
// A's write: B does not know its update was lost.
func playStory(ctx context.Context, a, b *client.Client, lock string, store labStore, unit time.Duration, retry bool) labRun {
	var r labRun
	start := time.Now()
	at := func(t float64) {
		time.Sleep(time.Until(start.Add(time.Duration(t * float64(unit)))))
	}
	leaseA, err := a.Acquire(ctx, lock, client.TTL(5*unit), client.Owner("worker-a"), client.KeepAlive(-1))
	if err != nil {
		r.err = fmt.Errorf("t=0: A acquire: %w", err)
		return r
	}
	r.tokenA = leaseA.Token()
	lostAt := make(chan time.Duration, 1)
	go func() {
		<-leaseA.Done()
		lostAt <- time.Since(start)
	}()

	at(4)
	if l, err := b.Acquire(ctx, lock, client.TTL(5*unit), client.Owner("worker-b")); err == nil {
		r.busyAt4 = fmt.Errorf("granted token %d while A held the lock", l.Token())
		_ = l.Release(ctx)
	} else {
		r.busyAt4 = err
	}
	// A's lease, granted after start, ends at the server no earlier than
	// t=5: an answer that came before t=5 was given while A held the lock,
	// and must be BUSY. One that came later may have been given after A's
	// lease ended (the try itself late, on a loaded machine): then nothing
	// follows from it.
	if answered := time.Since(start); !errors.Is(r.busyAt4, fence.ErrBusy) && answered >= 5*unit {
		r.slipped = fmt.Sprintf("B's try of t=4 was answered at %s, when A's lease (TTL 5) may have ended", seconds(answered, unit))
		return r
	}

	at(6)
	// A wait of one unit absorbs the server's expiry latency; the lock is
	// free by now, so it is granted at once.
	leaseB, err := b.Acquire(ctx, lock, client.TTL(5*unit), client.Owner("worker-b"), client.Wait(unit))
	if errors.Is(err, fence.ErrBusy) {
		// A's lease had not ended for the server one story second after
		// t=6: on a loaded machine its grant (and so its TTL) started
		// late, or the server's expiry ran late.
		r.slipped = fmt.Sprintf("B's acquire of t=6 found A's lease not yet ended at %s", seconds(time.Since(start), unit))
		return r
	}
	if err != nil {
		r.err = fmt.Errorf("t=6: B acquire: %w", err)
		return r
	}
	defer leaseB.Release(context.WithoutCancel(ctx))
	r.tokenB = leaseB.Token()
	r.bWrite8, r.bWrite8Err = store.write(ctx, 8, r.tokenB)

	at(7)
	select {
	case r.aLostAt = <-lostAt:
	default:
		// A's client has not reported the loss by t=7, two story seconds
		// after its deadline: its deadline watch never fired (a G8
		// failure the checks report: aLostAt stays 0), or fired late on a
		// loaded machine — told apart by waiting for it (what is played
		// next needs nothing of A's client).
		select {
		case lost := <-lostAt:
			r.slipped = fmt.Sprintf("A's client reported its lease lost at %s, after t=7", seconds(lost, unit))
			return r
		case <-ctx.Done():
		}
	}
	r.aWrite5, r.aWrite5Err = store.write(ctx, 5, r.tokenA) // A's code did not stop on its own
	if r.afterA, r.afterALast, err = store.read(ctx); err != nil {
		r.err = fmt.Errorf("t=7: read: %w", err)
		return r
	}
	r.final, r.finalLast = r.afterA, r.afterALast
	if !retry {
		return r
	}
	r.retry, r.retryErr = store.write(ctx, 8, r.tokenB)
	if r.final, r.finalLast, err = store.read(ctx); err != nil {
		r.err = fmt.Errorf("read: %w", err)
	}
	return r
}

// labCheck is one row of the verdict.
type labCheck struct {
	what string
	ok   bool
}

// checkNaive: what the story says of the run without fencing.
func (r labRun) checkNaive() []labCheck {
	return []labCheck{
		{"run 1 (without fencing): B refused (busy) at t=4", errors.Is(r.busyAt4, fence.ErrBusy)},
		{fmt.Sprintf("run 1 (without fencing): A's token < B's token (%d < %d)", r.tokenA, r.tokenB), r.tokenA < r.tokenB},
		{"run 1 (without fencing): B's write of 8 accepted", r.bWrite8Err == nil},
		{"run 1 (without fencing): A's late write of 5 accepted", r.aWrite5Err == nil},
		{"run 1 (without fencing): the stock ends at 5, B's 8 lost", r.final == "5"},
	}
}

// checkFenced: what the story says of the run with fencing.
func (r labRun) checkFenced() []labCheck {
	var stale *fence.StaleTokenError
	isStale := errors.As(r.aWrite5Err, &stale)
	return []labCheck{
		{"run 2 (with fencing): B refused (busy) at t=4", errors.Is(r.busyAt4, fence.ErrBusy)},
		{fmt.Sprintf("run 2 (with fencing): A's token < B's token (%d < %d)", r.tokenA, r.tokenB), r.tokenA < r.tokenB},
		{"run 2 (with fencing): A's client reported its lease lost before t=7", r.aLostAt > 0},
		{"run 2 (with fencing): B's write of 8 accepted", r.bWrite8Err == nil},
		{"run 2 (with fencing): A's write refused with STALE_TOKEN naming both tokens",
			isStale && stale.Token == r.tokenA && stale.LastAccepted == r.tokenB},
		{"run 2 (with fencing): stock still 8 after A's attempt", r.afterA == "8" && r.afterALast == r.tokenB},
		{"run 2 (with fencing): B's retry of 8 with the same token accepted", r.retryErr == nil},
		{fmt.Sprintf("run 2 (with fencing): the stock ends at 8, last_token = B's token %d", r.tokenB), r.final == "8" && r.finalLast == r.tokenB},
	}
}
