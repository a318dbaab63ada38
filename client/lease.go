package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fenceworks/fence"
)

// Errors that say why a lease ended; Lease.Err returns them (or a
// *LostError).
var (
	// ErrLeaseLost matches every *LostError. It is fence.ErrLeaseLost, so
	// errors.Is works with either name.
	ErrLeaseLost = fence.ErrLeaseLost
	// ErrDeadlinePassed: the safe deadline passed before a renew succeeded.
	ErrDeadlinePassed = errors.New("safe deadline passed without a successful renew")
	// ErrReleased: the lease was released with Lease.Release.
	ErrReleased = errors.New("fence: lease released")
)

// LostError says a lease was lost and why: Cause is the renew refusal (a
// typed fence error such as *fence.LeaseExpiredError) or ErrDeadlinePassed.
type LostError struct {
	Name  string
	Token fence.Token
	Cause error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("lease of lock %q with token %d lost: %v", e.Name, e.Token, e.Cause)
}

// Is reports ErrLeaseLost.
func (e *LostError) Is(target error) bool { return target == ErrLeaseLost }

// Unwrap returns the cause.
func (e *LostError) Unwrap() error { return e.Cause }

// Lease is a held lock with its fencing token, kept alive in the
// background: by its Client's session (a lease acquired without TTL or
// KeepAlive; see the package doc) or by its own keepalive (standalone).
//
// The holder may act as owner only before Deadline, and must send Token with
// every protected write so that the store refuses it if the lease was lost
// anyway. Done and Context are closed when the lease ends: lost (Err is a
// *LostError), released (ErrReleased), or its Client closed
// (ErrClientClosed). After that it is never renewed again.
// A Lease is safe for concurrent use.
type Lease struct {
	c         *Client
	name      string
	owner     string
	token     fence.Token
	keepAlive time.Duration

	// sess is the session the lease is bound to (nil: a standalone lease)
	// and gen the session's generation it was granted in. A session lease
	// has no goroutine and no timer of its own: its deadline is the
	// session's, and the session ends it.
	sess *session
	gen  uint64

	done chan struct{} // closed when the lease ends
	// kaCtx bounds the keepalive loop of a standalone lease; Release
	// cancels it first so that a renew racing with the release is not
	// taken for a loss.
	kaCtx    context.Context
	kaCancel context.CancelFunc

	mu sync.Mutex
	// ctx is made on the first call of Context and canceled with err when
	// the lease ends.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	ttl      time.Duration
	deadline time.Time         // local safe deadline, monotonic (a session lease: set when it ends)
	watch    *time.Timer       // fires at deadline
	err      error             // why it ended; nil while held
	lastErr  error             // last transient renew failure
	lastSent time.Time         // send time of the last successful grant or renew
	signed   fence.SignedToken // the token with the proof of the last grant or renew
	loopDone chan struct{}

	// How the lease holds its lock (fixed at the grant), and a set's
	// locks; proofs (under mu) are a set's proofs of the last grant or
	// renew, one per lock.
	mode    fence.Mode
	permits uint32
	locks   []fence.LockSpec
	proofs  []fence.SignedToken
}

func newLease(c *Client, granted fence.Lease, sent time.Time, keepAlive time.Duration) *Lease {
	kaCtx, kaCancel := context.WithCancel(context.Background())
	l := &Lease{
		c: c, name: granted.Name, owner: granted.Owner, token: granted.Token,
		keepAlive: keepAlive, done: make(chan struct{}), kaCtx: kaCtx, kaCancel: kaCancel,
		ttl:      granted.TTL,
		signed:   granted.Signed,
		deadline: fence.SafeDeadline(sent, granted.Remaining, c.cfg.drift),
		lastSent: sent,
		loopDone: make(chan struct{}),
	}
	l.setHeld(granted)
	return l
}

// setHeld keeps how granted holds its locks (mode, permits, a set's locks
// and proofs).
func (l *Lease) setHeld(granted fence.Lease) {
	l.mode, l.permits = granted.Mode, granted.Permits
	l.locks = append([]fence.LockSpec(nil), granted.Locks...)
	if len(granted.Proofs) == len(granted.Locks) {
		l.proofs = append([]fence.SignedToken(nil), granted.Proofs...)
	}
}

// Mode is how the lease holds its lock: fence.Exclusive or fence.Shared
// (a set: each lock's mode is in Locks).
func (l *Lease) Mode() fence.Mode { return l.mode }

// Permits is the permit count of the lock the lease holds one permit of
// (0: not a semaphore).
func (l *Lease) Permits() uint32 { return l.permits }

// Locks is every lock of a set's lease (AcquireSet), sorted by name, with
// its mode and permits; nil for a lease of one lock. Name is Locks[0].Name.
func (l *Lease) Locks() []fence.LockSpec { return append([]fence.LockSpec(nil), l.locks...) }

// Proofs are a set's proofs: Proofs()[i] is the token's proof for
// Locks()[i].Name, from the last grant or renew (nil for a lease of one
// lock: SignedToken is its proof).
func (l *Lease) Proofs() []fence.SignedToken {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fence.SignedToken(nil), l.proofs...)
}

// ProofFor is the proof to hand a guard of lock name's resource: the
// SignedToken of a lease of one lock, the lock's own proof of a set's
// lease, and the bare token for a lock the lease does not hold (which a
// guard with a key set refuses).
func (l *Lease) ProofFor(name string) fence.SignedToken {
	if len(l.locks) == 0 {
		if name == l.name {
			return l.SignedToken()
		}
		return fence.SignedToken{Token: l.token}
	}
	held := fence.Lease{Name: l.name, Token: l.token, Locks: l.locks, Proofs: l.Proofs()}
	return held.ProofFor(name)
}

// Name is the lock's name.
func (l *Lease) Name() string { return l.name }

// Owner is the owner label the lease was acquired with.
func (l *Lease) Owner() string { return l.owner }

// Token is the fencing token of this grant. Send it with every protected
// write.
func (l *Lease) Token() fence.Token { return l.token }

// SignedToken is the token with the proof of its grant (G9): the one value
// to hand a guard that holds the cluster's key set (its text form is the
// Fence-Token header's). A lease keeps the key it was granted under; after
// that key is retired --now (a leak), a renew — of a standalone lease or of
// one bound to the session (Lease.Renew) — hands back a proof by the
// signing key:
// the value is that of the last grant or renew, so read it again after a
// renew rather than keeping an old copy. A session's keepalives do not
// re-sign its leases. It carries no proof (bare
// token) when the server made none.
func (l *Lease) SignedToken() fence.SignedToken {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.signed.Token != l.token {
		return fence.SignedToken{Token: l.token}
	}
	return l.signed
}

// TTL is the TTL the lease was granted or last renewed with; for a lease
// bound to a session, the session's TTL.
func (l *Lease) TTL() time.Duration {
	if l.sess != nil {
		return l.sess.ttlOf()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Deadline is the local safe deadline (monotonic clock): the lease is held
// at least until then, as computed from the send time of the last
// successful grant or renew (fence.SafeDeadline). For a lease bound to a
// session it is the session's safe deadline, counted from the send time of
// its last successful keepalive.
func (l *Lease) Deadline() time.Time {
	if l.sess != nil {
		if d, ok := l.sess.deadlineOf(l.gen); ok {
			return d
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done is closed when the lease ends (lost, released, or client closed).
func (l *Lease) Done() <-chan struct{} { return l.done }

// Context is canceled when the lease ends; context.Cause returns Err. Use it
// to bound work done as the owner. It is made on the first call (a lease
// whose Context is never asked for costs no context).
func (l *Lease) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.err != nil {
			l.cancel(l.err)
		}
	}
	return l.ctx
}

// Err is nil while the lease is held; then why it ended: a *LostError
// (errors.Is ErrLeaseLost; its Cause is the renew refusal or
// ErrDeadlinePassed), ErrReleased, or ErrClientClosed.
//
// Err never lags the clock: once the safe deadline has passed it reports the
// loss even if the deadline timer has not run yet (G8).
func (l *Lease) Err() error {
	if l.sess != nil {
		l.sess.checkPassed()
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.err
	}
	l.mu.Lock()
	err, passed := l.err, l.watch != nil && !time.Now().Before(l.deadline)
	l.mu.Unlock()
	if err == nil && passed {
		l.checkDeadline()
		l.mu.Lock()
		err = l.err
		l.mu.Unlock()
	}
	return err
}

// Renew renews the lease now with its current TTL and moves its deadline.
// A refusal ends the lease (Err reports it) and is returned.
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	ctx, cancel := mergeDone(ctx, l.Context())
	defer cancel()
	if l.sess != nil {
		return l.sess.renewLease(ctx, l)
	}
	granted, sent, err := l.c.renew(ctx, l.name, l.token, 0)
	if err != nil {
		if fence.ReasonOf(err) != "" {
			l.stop(&LostError{Name: l.name, Token: l.token, Cause: err})
		}
		if lost := l.Err(); lost != nil {
			return lost
		}
		return err
	}
	return l.extend(granted, sent)
}

// Release frees the lock on the server and ends the lease (Err becomes
// ErrReleased). The keepalive stops even when the release fails, in which
// case the lease expires by its TTL. Releasing twice is a no-op; releasing a
// lost lease returns why it was lost and sends nothing.
func (l *Lease) Release(ctx context.Context) error {
	switch err := l.Err(); {
	case err == ErrReleased:
		return nil // released before
	case err != nil && err != ErrClientClosed:
		return err // lost: nothing is held; report why
	}
	if l.sess != nil {
		err := l.sess.release(ctx, l.name, l.token)
		l.stop(ErrReleased)
		return err
	}
	l.kaCancel()
	<-l.loopDone
	err := l.c.releaseUnary(ctx, l.name, l.token)
	l.stop(ErrReleased)
	return err
}

// extend moves the deadline after a successful renew sent at sent. The
// newest observation wins: a renew sent after the last one sets the
// deadline even when it is earlier (the TTL was shortened, e.g. by a renew
// with a shorter --ttl elsewhere); a reply to an older send can only pull
// the deadline in, never push it out. A renew whose reply arrives after the
// lease was declared lost does not revive it.
func (l *Lease) extend(granted fence.Lease, sent time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	d := fence.SafeDeadline(sent, granted.Remaining, l.c.cfg.drift)
	newer := sent.After(l.lastSent)
	if newer || d.Before(l.deadline) {
		l.deadline = d
		if l.watch != nil {
			l.watch.Reset(time.Until(d))
		}
	}
	if newer {
		l.ttl = granted.TTL
		l.lastSent = sent
		if granted.Signed.Token == l.token {
			l.signed = granted.Signed
		}
		l.reproof(granted.Proofs)
	}
	l.lastErr = nil
	return nil
}

// reproof keeps a renew's proofs of a set's lease (l.mu held): all of
// them, one per lock, each of the lease's token, or none.
func (l *Lease) reproof(proofs []fence.SignedToken) {
	if len(proofs) != len(l.locks) || len(proofs) == 0 {
		return
	}
	for _, p := range proofs {
		if !p.Signed() || p.Token != l.token {
			return
		}
	}
	l.proofs = append([]fence.SignedToken(nil), proofs...)
}

// resign keeps st, the proof of a renew of this lease, as the lease's
// signed token (a proof of another token, or none, is ignored).
func (l *Lease) resign(st fence.SignedToken) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && st.Signed() && st.Token == l.token {
		l.signed = st
	}
}

// RenewErr is the error of the last background renewal when it failed (or
// got no answer within TTL/3) and no renewal has succeeded since; nil while
// renewals succeed. A lease whose renewals fail is lost at Deadline unless
// one succeeds before: a holder that needs time to stop (fence run) starts
// stopping when RenewErr is set and Deadline is near.
//
// For a lease bound to a session it is the error of the session's
// keepalives (the stream broke, a keepalive got no answer).
func (l *Lease) RenewErr() error {
	if l.sess != nil {
		return l.sess.keepAliveErr()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// start arms the deadline watch and the keepalive loop.
func (l *Lease) start() {
	l.mu.Lock()
	l.watch = time.AfterFunc(time.Until(l.deadline), l.checkDeadline)
	l.mu.Unlock()
	if l.keepAlive >= 0 {
		go l.keepAliveLoop()
	} else {
		close(l.loopDone)
	}
}

// checkDeadline runs when the deadline timer fires: the lease is lost unless
// a renew moved the deadline meanwhile.
func (l *Lease) checkDeadline() {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	if wait := time.Until(l.deadline); wait > 0 {
		l.watch.Reset(wait)
		l.mu.Unlock()
		return
	}
	cause := ErrDeadlinePassed
	if l.lastErr != nil {
		cause = fmt.Errorf("%w (last renew error: %v)", ErrDeadlinePassed, l.lastErr)
	}
	l.mu.Unlock()
	l.stop(&LostError{Name: l.name, Token: l.token, Cause: cause})
}

// stop ends the lease with reason (the first reason wins) and stops its
// timers. It does not wait for an in-flight renew, which is canceled.
func (l *Lease) stop(reason error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = reason
	if l.watch != nil {
		l.watch.Stop()
	}
	close(l.done)
	if l.cancel != nil {
		l.cancel(reason)
	}
	l.mu.Unlock()
	if l.kaCancel != nil {
		l.kaCancel()
	}
	if l.sess != nil {
		l.sess.forget(l)
	}
	l.c.untrack(l)
	if errors.Is(reason, ErrLeaseLost) {
		l.c.cfg.logger.Warn("fence: lease lost", "lock", l.name, "token", l.token, "err", reason)
	}
}

// mergeDone returns a context canceled when either a or b is done.
func mergeDone(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(a)
	stop := context.AfterFunc(b, func() { cancel(context.Cause(b)) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}
