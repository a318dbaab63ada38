// Package memservice is an in-memory fence.Service for tests: one
// state.Machine behind a mutex, stamped by a clock, with the node's
// handling of blocking acquires (a queued acquire waits for its Event; a
// caller that goes away withdraws its wait) and a ticker that ends leases,
// waits and sessions when they are due. There is no log, no raft and no
// disk: it holds the contract of fence.Service (TestConformance in this
// package runs testkit/servicetest's table against it and compares every
// answer with a real node's), and a server's handler tests run over it in
// milliseconds.
//
// It is test-only code (testkit/ is never linked by what ships).
package memservice

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// ErrClosed is returned by every call after Close; it matches
// fence.ErrUnavailable.
var ErrClosed = unavailableError{errors.New("memservice: closed")}

// Clock is server time in nanoseconds; it must never go back.
type Clock func() int64

// Config configures a Service. The zero value is a store with
// state.DefaultConfig()'s rules on the real monotonic clock.
type Config struct {
	// Rules are recorded as the store's first command (an OpConfig, as a
	// node records its initial rules); zero: state.DefaultConfig().
	Rules state.Config
	// Now, if set, is the server clock (a test clock); nil: the time since
	// New on the monotonic clock. The ticker sleeps on real timers, so a
	// test clock's owner calls Tick after moving it.
	Now Clock
	// WaitMargin bounds a blocking acquire at its Wait plus this margin
	// (as node.Config.WaitMargin); default 2s.
	WaitMargin time.Duration
	// ClusterID is recorded with the rules; default "mem-cluster".
	ClusterID string
}

// Service is an in-memory fence.Service (see the package doc). Close it.
type Service struct {
	cfg  Config
	now  Clock
	kick chan struct{} // cap 1: the next deadline may have changed
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex // guards everything below, and every use of m
	m       *state.Machine
	waiters map[string]*waitEntry
	nwait   int
	closed  bool
	applied uint64 // commands applied (the OpConfig included): an applied index
}

// waitEntry is the attempts of one request_id waiting here.
type waitEntry struct {
	chans   []chan state.Event
	attempt uint32 // highest attempt seen while any was registered
}

var _ fence.Service = (*Service)(nil)

// New returns an empty store with cfg's rules, its ticker running.
func New(cfg Config) *Service {
	if cfg.Rules == (state.Config{}) {
		cfg.Rules = state.DefaultConfig()
	}
	if cfg.WaitMargin == 0 {
		cfg.WaitMargin = 2 * time.Second
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "mem-cluster"
	}
	now := cfg.Now
	if now == nil {
		start := time.Now()
		now = func() int64 { return int64(time.Since(start)) }
	}
	s := &Service{
		cfg: cfg, now: now, kick: make(chan struct{}, 1), done: make(chan struct{}),
		m: state.New(), waiters: make(map[string]*waitEntry),
	}
	res := s.m.Apply(state.Command{Op: state.OpConfig, Now: now(), Config: cfg.Rules, ClusterID: cfg.ClusterID})
	if res.Err != nil {
		panic("memservice: rules refused: " + res.Err.Error())
	}
	// A signing key, as a node's first leader proposes one: its seed is
	// drawn from the cluster id (a test store's key need not be secret).
	seed := sha256.Sum256([]byte("memservice signing key " + cfg.ClusterID))
	if res := s.m.Apply(state.Command{Op: state.OpKeyRotate, Now: now(), Value: seed[:], Delta: 1}); res.Err != nil {
		panic("memservice: signing key refused: " + res.Err.Error())
	}
	s.applied = 2
	s.wg.Add(1)
	go s.runTicker()
	return s
}

// Close stops the ticker; every waiting acquire returns ErrClosed and
// every later call is refused with it. It is idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Apply applies cmd now (Now stamped from the clock, no Slack) and returns
// its Result, as node.Node.Apply does: an OpAcquire with Wait > 0 or a
// RequestID that is queued waits for its Event (or ctx, or Close). The
// error is nil, ErrClosed or ctx.Err(); a refusal is Result.Err.
func (s *Service) Apply(ctx context.Context, cmd state.Command) (state.Result, error) {
	if p, ok := fence.PrincipalFrom(ctx); ok {
		cmd.Principal, cmd.Admin = p.Name, p.Admin
	}
	if cmd.Op == state.OpAcquire && cmd.Session != 0 && cmd.Seq > 0 && cmd.RequestID == "" {
		cmd.RequestID = state.SessionRequestID(cmd.Session, cmd.Seq)
	}
	if cmd.Op == state.OpAcquire && (cmd.Wait > 0 || cmd.RequestID != "") {
		return s.acquireWaiting(ctx, cmd)
	}
	return s.apply(cmd, nil)
}

// apply runs cmd under the lock; ch, if set, is registered as a waiter
// for cmd.RequestID first (so its Event cannot be missed).
func (s *Service) apply(cmd state.Command, ch chan state.Event) (state.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return state.Result{}, ErrClosed
	}
	if ch != nil {
		s.addLocked(cmd.RequestID, ch)
	}
	cmd.Now, cmd.Slack = max(s.now(), s.m.Now()), 0
	res := s.m.Apply(cmd)
	s.applied++
	for _, ev := range res.Events {
		s.deliverLocked(ev)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return res, nil
}

func (s *Service) acquireWaiting(ctx context.Context, cmd state.Command) (state.Result, error) {
	if cmd.RequestID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		cmd.RequestID = "mem-" + hex.EncodeToString(b[:])
	}
	ch := make(chan state.Event, 1)
	res, err := s.apply(cmd, ch)
	if err != nil {
		return res, err
	}
	if !res.Queued {
		s.leave(cmd.RequestID, ch, 0)
		return res, nil
	}
	s.mu.Lock()
	if e := s.waiters[cmd.RequestID]; e != nil {
		e.attempt = max(e.attempt, res.Attempt)
	}
	s.mu.Unlock()
	bound := time.NewTimer(cmd.Wait + s.cfg.WaitMargin)
	defer bound.Stop()
	select {
	case ev := <-ch:
		s.leave(cmd.RequestID, ch, res.Attempt)
		return state.Result{Lease: ev.Lease, Err: ev.Err, Events: res.Events}, nil
	case <-ctx.Done():
		s.endAttempt(cmd.Name, cmd.RequestID, ch, res.Attempt)
		return state.Result{}, ctx.Err()
	case <-bound.C:
		select {
		case ev := <-ch:
			s.leave(cmd.RequestID, ch, res.Attempt)
			return state.Result{Lease: ev.Lease, Err: ev.Err, Events: res.Events}, nil
		default:
		}
		s.endAttempt(cmd.Name, cmd.RequestID, ch, res.Attempt)
		return state.Result{Err: &fence.BusyError{Name: cmd.Name, Waited: true}, Events: res.Events}, nil
	case <-s.done:
		s.leave(cmd.RequestID, ch, res.Attempt)
		return state.Result{}, ErrClosed
	}
}

// endAttempt ends one attempt of a queued acquire whose caller went away:
// the last attempt waiting here withdraws the queue entry (naming the
// highest attempt seen), as the node does; if the grant won the race the
// machine's OpCancelWait releases that lease.
func (s *Service) endAttempt(name, requestID string, ch chan state.Event, attempt uint32) {
	if last, highest := s.leave(requestID, ch, attempt); last {
		s.cancelWait(name, requestID, highest)
	}
}

func (s *Service) cancelWait(name, requestID string, attempt uint32) {
	s.apply(state.Command{Op: state.OpCancelWait, Name: name, RequestID: requestID, Attempt: attempt}, nil)
}

func (s *Service) addLocked(id string, ch chan state.Event) {
	e := s.waiters[id]
	if e == nil {
		e = &waitEntry{}
		s.waiters[id] = e
	}
	e.chans = append(e.chans, ch)
	s.nwait++
}

// leave unregisters ch; last reports whether no other attempt of id waits
// here now, highest the highest attempt seen for id (at least attempt).
func (s *Service) leave(id string, ch chan state.Event, attempt uint32) (last bool, highest uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	highest = attempt
	e := s.waiters[id]
	if e == nil {
		return true, highest
	}
	highest = max(highest, e.attempt)
	for i, c := range e.chans {
		if c == ch {
			e.chans = append(e.chans[:i:i], e.chans[i+1:]...)
			s.nwait--
			break
		}
	}
	if len(e.chans) == 0 {
		delete(s.waiters, id)
		return true, highest
	}
	return false, highest
}

func (s *Service) deliverLocked(ev state.Event) {
	e := s.waiters[ev.RequestID]
	if e == nil {
		return
	}
	e.attempt = max(e.attempt, ev.Attempt)
	for _, ch := range e.chans {
		select {
		case ch <- ev:
		default:
		}
	}
}

// runTicker applies an OpTick whenever the machine's next deadline is due
// (on the real clock; a test clock's owner calls Tick).
func (s *Service) runTicker() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var lastTick int64 = -1
	for {
		s.mu.Lock()
		at, ok := s.m.NextDeadline()
		now := max(s.now(), s.m.Now())
		s.mu.Unlock()
		if ok && at <= lastTick {
			ok = false
		}
		if !ok {
			select {
			case <-s.done:
				return
			case <-s.kick:
			}
			continue
		}
		if now < at {
			timer.Reset(time.Duration(at - now))
			select {
			case <-s.done:
				timer.Stop()
				return
			case <-s.kick:
			case <-timer.C:
			}
			timer.Stop()
			continue
		}
		lastTick = s.Tick()
	}
}

// Tick applies an OpTick now (what is due ends) and returns its time.
func (s *Service) Tick() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.m.Now()
	}
	cmd := state.Command{Op: state.OpTick, Now: max(s.now(), s.m.Now())}
	s.applied++
	res := s.m.Apply(cmd)
	for _, ev := range res.Events {
		s.deliverLocked(ev)
	}
	return cmd.Now
}

// Waiters is the number of blocking acquires waiting here (as
// node.Status().Waiters).
func (s *Service) Waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nwait
}

// LastToken is the last token granted.
func (s *Service) LastToken() fence.Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.LastToken()
}

// MaxTTL is the largest TTL the recorded rules allow.
func (s *Service) MaxTTL() time.Duration { return s.Limits().MaxTTL }

// Limits are the request bounds of the recorded rules.
func (s *Service) Limits() fence.Limits {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Config().Limits()
}

// ClusterID is the cluster id recorded with the rules.
func (s *Service) ClusterID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.ClusterID()
}

// Now is the server time the next command would be stamped with.
func (s *Service) Now() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.now(), s.m.Now())
}

// Machine calls f with the machine under the lock (f must not keep it).
func (s *Service) Machine(f func(m *state.Machine)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.m)
}

// Applied is the number of commands applied so far (the first OpConfig,
// the signing key and every tick included), as a node's applied index counts them.
func (s *Service) Applied() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// SnapshotView copies the state as of now (as node.BackupView does), with
// the applied count, the counter and the server time it is as of.
func (s *Service) SnapshotView() (view *state.SnapshotView, applied uint64, last fence.Token, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.SnapshotView(), s.applied, s.m.LastToken(), max(s.now(), s.m.Now())
}
