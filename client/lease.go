package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
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
	c     *Client
	name  string
	owner string
	token fence.Token

	// sess is the session the lease is bound to (nil: a standalone lease)
	// and gen the session's generation it was granted in. A session lease
	// has no goroutine, no timer, no channel and no context of its own
	// until asked for one: its deadline is the session's, and the session
	// ends it.
	sess *session
	gen  uint64

	// How the lease holds its lock (fixed at the grant).
	mode    fence.Mode
	permits uint32

	mu sync.Mutex
	// done is made on the first call of Done (or when the lease ends) and
	// closed when the lease ends.
	done chan struct{}
	err  error // why it ended; nil while held
	// The token's proof of the last grant or renew, kept compact: the
	// cluster and key ids in a proofKey that the Client's leases share,
	// the 64-byte signature inline (pkey nil: no proof, or one in
	// leaseExtra.odd).
	pkey *proofKey
	sig  [ed25519.SignatureSize]byte

	// leaseExtra holds what only some leases need: a standalone lease's
	// keepalive, a set's locks, a lease's context once asked for. Nil for
	// a session lease of one lock until then (made under mu; a standalone
	// lease has it from the start).
	*leaseExtra
}

// leaseExtra is the part of a Lease that a session lease of one lock,
// the common case held by the million (docs/design.md, "A lease in the
// client"), does without.
type leaseExtra struct {
	keepAlive time.Duration
	// kaCtx bounds the keepalive loop of a standalone lease; Release
	// cancels it first so that a renew racing with the release is not
	// taken for a loss.
	kaCtx    context.Context
	kaCancel context.CancelFunc
	loopDone chan struct{}

	// ctx is made on the first call of Context and canceled with err when
	// the lease ends.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	ttl      time.Duration
	deadline time.Time   // local safe deadline, monotonic (a session lease: set when it ends)
	watch    *time.Timer // fires at deadline
	lastErr  error       // last transient renew failure
	lastSent time.Time   // send time of the last successful grant or renew

	// A set's locks; proofs (under mu) are a set's proofs of the last
	// grant or renew, one per lock.
	locks  []fence.LockSpec
	proofs []fence.SignedToken

	odd fence.SignedToken // a proof whose signature is not ed25519's 64 bytes, kept whole
}

// proofKey is what the proofs of one cluster's key have in common.
type proofKey struct{ clusterID, keyID string }

// setProof keeps st as the lease's proof (l.mu held, or l not yet shared):
// a proof of another token, or none, leaves the token bare.
func (l *Lease) setProof(st fence.SignedToken) {
	l.pkey = nil
	if l.leaseExtra != nil {
		l.odd = fence.SignedToken{}
	}
	if !st.Signed() || st.Token != l.token {
		return
	}
	if len(st.Signature) != ed25519.SignatureSize {
		st.Signature = bytes.Clone(st.Signature)
		l.extra().odd = st
		return
	}
	l.pkey = l.c.proofKey(st.ClusterID, st.KeyID)
	copy(l.sig[:], st.Signature)
}

// signed is the lease's token with its proof (l.mu held).
func (l *Lease) signed() fence.SignedToken {
	switch {
	case l.pkey != nil:
		return fence.SignedToken{Token: l.token, ClusterID: l.pkey.clusterID, KeyID: l.pkey.keyID, Signature: bytes.Clone(l.sig[:])}
	case l.leaseExtra != nil && l.odd.Signed():
		st := l.odd
		st.Signature = bytes.Clone(st.Signature)
		return st
	}
	return fence.SignedToken{Token: l.token}
}

// extra returns l's leaseExtra, making it (l.mu held, or l not yet shared).
func (l *Lease) extra() *leaseExtra {
	if l.leaseExtra == nil {
		l.leaseExtra = &leaseExtra{}
	}
	return l.leaseExtra
}

func newLease(c *Client, granted fence.Lease, sent time.Time, keepAlive time.Duration) *Lease {
	kaCtx, kaCancel := context.WithCancel(context.Background())
	l := &Lease{
		c: c, name: granted.Name, owner: c.shareOwner(granted.Owner), token: granted.Token,
		leaseExtra: &leaseExtra{
			keepAlive: keepAlive, kaCtx: kaCtx, kaCancel: kaCancel,
			ttl:      granted.TTL,
			deadline: fence.SafeDeadline(sent, granted.Remaining, c.cfg.drift),
			lastSent: sent,
			loopDone: make(chan struct{}),
		},
	}
	l.setProof(granted.Signed)
	l.setHeld(granted)
	return l
}

// setHeld keeps how granted holds its locks (mode, permits, a set's locks
// and proofs).
func (l *Lease) setHeld(granted fence.Lease) {
	l.mode, l.permits = granted.Mode, granted.Permits
	if len(granted.Locks) == 0 {
		return
	}
	x := l.extra()
	x.locks = append([]fence.LockSpec(nil), granted.Locks...)
	if len(granted.Proofs) == len(granted.Locks) {
		x.proofs = append([]fence.SignedToken(nil), granted.Proofs...)
	}
}

// setLocks is the set's locks (nil for a lease of one lock).
func (l *Lease) setLocks() []fence.LockSpec {
	if l.leaseExtra == nil {
		return nil
	}
	return l.locks
}

// Mode is how the lease holds its lock: fence.Exclusive or fence.Shared
// (a set: each lock's mode is in Locks).
func (l *Lease) Mode() fence.Mode { return l.mode }

// Permits is the permit count of the lock the lease holds one permit of
// (0: not a semaphore).
func (l *Lease) Permits() uint32 { return l.permits }

// Locks is every lock of a set's lease (AcquireSet), sorted by name, with
// its mode and permits; nil for a lease of one lock. Name is Locks[0].Name.
func (l *Lease) Locks() []fence.LockSpec { return append([]fence.LockSpec(nil), l.setLocks()...) }

// Proofs are a set's proofs: Proofs()[i] is the token's proof for
// Locks()[i].Name, from the last grant or renew (nil for a lease of one
// lock: SignedToken is its proof).
func (l *Lease) Proofs() []fence.SignedToken {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leaseExtra == nil {
		return nil
	}
	return append([]fence.SignedToken(nil), l.proofs...)
}

// ProofFor is the proof to hand a guard of lock name's resource: the
// SignedToken of a lease of one lock, the lock's own proof of a set's
// lease, and the bare token for a lock the lease does not hold (which a
// guard with a key set refuses).
func (l *Lease) ProofFor(name string) fence.SignedToken {
	locks := l.setLocks()
	if len(locks) == 0 {
		if name == l.name {
			return l.SignedToken()
		}
		return fence.SignedToken{Token: l.token}
	}
	held := fence.Lease{Name: l.name, Token: l.token, Locks: locks, Proofs: l.Proofs()}
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
	return l.signed()
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
	if l.leaseExtra == nil {
		return time.Time{}
	}
	return l.deadline
}

// Done is closed when the lease ends (lost, released, or client closed).
// It is made on the first call: a lease whose Done is never asked for
// costs no channel.
func (l *Lease) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
		if l.err != nil {
			close(l.done)
		}
	}
	return l.done
}

// Context is canceled when the lease ends; context.Cause returns Err. Use it
// to bound work done as the owner. It is made on the first call (a lease
// whose Context is never asked for costs no context).
func (l *Lease) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if x := l.extra(); x.ctx == nil {
		x.ctx, x.cancel = context.WithCancelCause(context.Background())
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
			l.setProof(granted.Signed)
		}
		l.reproof(granted.Proofs)
	}
	l.lastErr = nil
	return nil
}

// reproof keeps a renew's proofs of a set's lease (l.mu held): all of
// them, one per lock, each of the lease's token, or none.
func (l *Lease) reproof(proofs []fence.SignedToken) {
	if len(proofs) != len(l.setLocks()) || len(proofs) == 0 {
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
		l.setProof(st)
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
	x := l.leaseExtra
	if x != nil && x.watch != nil {
		x.watch.Stop()
	}
	if l.done != nil {
		close(l.done)
	}
	if x != nil && x.cancel != nil {
		x.cancel(reason)
	}
	l.mu.Unlock()
	if x != nil && x.kaCancel != nil {
		x.kaCancel()
	}
	if l.sess != nil {
		l.sess.forget(l)
	} else {
		l.c.untrack(l)
	}
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
