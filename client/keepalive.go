package client

import (
	"context"
	"time"

	"github.com/fenceworks/fence"
)

// keepAliveLoop renews the lease every keepAlive (default TTL/3) after the
// send time of the last successful renew. Each attempt is bounded by TTL/3.
// A transient failure (or an attempt without an answer) is retried with
// backoff and reported by RenewErr; a refusal ends the lease. The deadline watch (checkDeadline)
// ends it independently when the safe deadline passes first, which also
// cancels a renew in flight. The loop returns when the lease ends or
// Release stops it.
func (l *Lease) keepAliveLoop() {
	defer close(l.loopDone)
	pause := l.c.cfg.backoffMin
	next := l.nextRenew()
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-l.kaCtx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		sent := time.Now()
		// An attempt gets TTL/3: one that hangs (a paused server) must fail
		// early enough to be retried, and to tell RenewErr, before the
		// deadline.
		actx, cancel := context.WithTimeout(l.kaCtx, l.TTL()/3)
		ep := l.c.pick()
		granted, err := l.c.renewAttempt(actx, ep, l.name, l.token, 0)
		cancel()
		switch {
		case err == nil:
			if l.extend(granted, sent) != nil {
				return
			}
			pause = l.c.cfg.backoffMin
			next = l.nextRenew()
		case l.kaCtx.Err() != nil:
			return
		case fence.ReasonOf(toError("renew", err)) != "":
			l.stop(&LostError{Name: l.name, Token: l.token, Cause: toError("renew", err)})
			return
		default:
			// Unreachable, Unavailable or no answer in TTL/3: the next
			// renew goes to the next endpoint (a renew is safe anywhere).
			l.c.failover(ep)
			l.mu.Lock()
			l.lastErr = err
			l.mu.Unlock()
			l.c.cfg.logger.Debug("fence: renew failed, retrying", "lock", l.name, "token", l.token, "err", err)
			next = time.Now().Add(jitter(pause))
			pause = min(2*pause, max(l.interval(), l.c.cfg.backoffMin))
		}
	}
}

// interval is the keepalive period: the configured one, or TTL/3.
func (l *Lease) interval() time.Duration {
	if l.keepAlive > 0 {
		return l.keepAlive
	}
	return l.TTL() / 3
}

func (l *Lease) nextRenew() time.Time {
	l.mu.Lock()
	last := l.lastSent
	l.mu.Unlock()
	return last.Add(l.interval())
}
