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

// labRun is what one play of the seed's timeline observed.
type labRun struct {
	tokenA, tokenB fence.Token
	busyAt4        error         // B's try at t=4 (want *fence.BusyError)
	aLostAt        time.Duration // when A's client reported its lease lost (0: not by t=7)
	bWrite8        string        // B's write of 8 at t=6
	bWrite8Err     error
	aWrite5        string // A's late write of 5 at t=7
	aWrite5Err     error
	afterA         string // the stock after A's late write
	afterALast     fence.Token
	retry9         string // B's second write, 9
	retry9Err      error
	final          string
	finalLast      fence.Token
	err            error // the run could not be played (server unreachable, ...)
}

// playSeed plays the seed's timeline in real time, one seed second = unit:
// A acquires with TTL 5 at t=0 and then stalls (no renewals: the seed's
// pause); B tries at t=4; A's lease expires at t=5; B acquires at t=6 and
// writes 8; A wakes at t=7 and writes 5; then B writes 9.
func playSeed(ctx context.Context, a, b *client.Client, lock string, store labStore, unit time.Duration) labRun {
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

	at(6)
	// A wait of one unit absorbs the server's expiry latency; the lock is
	// free by now, so it is granted at once.
	leaseB, err := b.Acquire(ctx, lock, client.TTL(5*unit), client.Owner("worker-b"), client.Wait(unit))
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
	default: // A's client still believed it held the lease: a G8 failure the checks report
	}
	r.aWrite5, r.aWrite5Err = store.write(ctx, 5, r.tokenA) // A's code did not stop on its own
	if r.afterA, r.afterALast, err = store.read(ctx); err != nil {
		r.err = fmt.Errorf("t=7: read: %w", err)
		return r
	}
	r.retry9, r.retry9Err = store.write(ctx, 9, r.tokenB)
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

// checkNaive: what the seed says of the naive store.
func (r labRun) checkNaive() []labCheck {
	return []labCheck{
		{"naive: B refused (busy) at t=4", errors.Is(r.busyAt4, fence.ErrBusy)},
		{fmt.Sprintf("naive: A's token < B's token (%d < %d)", r.tokenA, r.tokenB), r.tokenA < r.tokenB},
		{"naive: B's write of 8 accepted", r.bWrite8Err == nil},
		{"naive: A's late write of 5 accepted over 8", r.aWrite5Err == nil && r.afterA == "5"},
		{"naive: stock after A's late write is 5 (old value won)", r.afterA == "5"},
	}
}

// checkFenced: what the seed says of the fenced store.
func (r labRun) checkFenced() []labCheck {
	var stale *fence.StaleTokenError
	isStale := errors.As(r.aWrite5Err, &stale)
	return []labCheck{
		{"fenced: B refused (busy) at t=4", errors.Is(r.busyAt4, fence.ErrBusy)},
		{fmt.Sprintf("fenced: A's token < B's token (%d < %d)", r.tokenA, r.tokenB), r.tokenA < r.tokenB},
		{"fenced: A's client reported its lease lost before t=7", r.aLostAt > 0},
		{"fenced: B's write of 8 accepted", r.bWrite8Err == nil},
		{"fenced: A's write refused with STALE_TOKEN naming both tokens",
			isStale && stale.Token == r.tokenA && stale.LastAccepted == r.tokenB},
		{"fenced: stock still 8 after A's attempt", r.afterA == "8" && r.afterALast == r.tokenB},
		{"fenced: B's retry write of 9 accepted with the same token", r.retry9Err == nil},
		{fmt.Sprintf("fenced: result stock 9, last_token = B's token %d", r.tokenB), r.final == "9" && r.finalLast == r.tokenB},
	}
}
