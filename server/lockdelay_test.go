package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// lockDelay is long enough never to end within a test: a lock in it stays
// delayed for the rest of the test.
const lockDelay = time.Hour

// expired waits until lock name's lease has expired, as the server's Get
// (a read: nothing is renewed) tells.
func expired(t *testing.T, url, name string) {
	t.Helper()
	until(t, "lock "+name+"'s lease expires", func() bool { return lockOf(t, url, name).GetLease() == nil })
}

// busyDetail is the BUSY refusal err carries: its raw ErrorDetail (as the
// server sent it, not as a client rebuilds it) and its Retry-After.
func busyDetail(t *testing.T, what string, err error) (*fencev1.ErrorDetail, string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
		t.Fatalf("%s = %v, want resource_exhausted BUSY", what, err)
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ed, ok := v.(*fencev1.ErrorDetail); ok && ed.GetReason() == string(fence.ReasonBusy) {
				return ed, ce.Meta().Get(apierr.HeaderRetryAfter)
			}
		}
	}
	t.Fatalf("%s = %v: no BUSY ErrorDetail among %d details", what, err, len(ce.Details()))
	return nil, ""
}

// wantDelayed checks a BUSY detail and its Retry-After say the lock is in
// its lock-delay: delayed, nobody holding it, a remaining delay of at most
// lockDelay, and Retry-After that remaining in whole seconds rounded up.
func wantDelayed(t *testing.T, what string, name string, delayed bool, holder string, holderToken uint64, remaining time.Duration, retryAfter string) {
	t.Helper()
	if !delayed || holder != "" || holderToken != 0 || remaining <= 0 || remaining > lockDelay {
		t.Fatalf("%s of %s: BUSY delayed=%t holder=%q holderToken=%d remaining=%s; want delayed, no holder, 0 < remaining <= %s",
			what, name, delayed, holder, holderToken, remaining, lockDelay)
	}
	if want := strconv.FormatInt(apierr.RetryAfter(remaining), 10); retryAfter != want {
		t.Fatalf("%s of %s: Retry-After %q, want %s (the remaining lock-delay %s in whole seconds, rounded up)", what, name, retryAfter, want, remaining)
	}
}

// An acquire's lock_delay reaches the store, over Connect JSON, gRPC and a
// plain JSON POST: once that lease expires, another owner's try is BUSY
// with the delayed fact in its detail (and facts), no holder, the
// remaining delay and Retry-After; Get shows the delay. Without lock_delay
// the expired lock is granted at once; with it, a released lock is too (a
// release starts no lock-delay).
func TestLockDelayReachesTheStore(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	for _, c := range protocols(url) {
		t.Run(c.name, func(t *testing.T) {
			acquire := func(name, owner string, ttl, delay time.Duration) (*fencev1.Lease, error) {
				req := &fencev1.AcquireRequest{Name: name, Owner: owner, Ttl: durationpb.New(ttl)}
				if delay > 0 {
					req.LockDelay = durationpb.New(delay)
				}
				r, err := c.locks.Acquire(ctx, connect.NewRequest(req))
				if err != nil {
					return nil, err
				}
				return r.Msg.GetLease(), nil
			}
			// Expired with a lock-delay: delayed.
			name := "ld-expired-" + c.name
			sent := time.Now()
			if _, err := acquire(name, "A", fence.MinTTL, lockDelay); err != nil {
				t.Fatal(err)
			}
			expired(t, url, name)
			l, err := acquire(name, "B", time.Hour, 0)
			if err == nil {
				t.Fatalf("acquire of %s in its lock-delay = granted %v, want BUSY delayed (was lock_delay passed on?)", name, l)
			}
			d, retry := busyDetail(t, "acquire in the lock-delay", err)
			wantDelayed(t, "acquire", name, d.GetDelayed(), d.GetHolder(), d.GetHolderToken(), d.GetRemaining().AsDuration(), retry)
			// The whole delay reached the store: it began when the lease
			// ended, after the acquire was sent, so what remains is at
			// least lock_delay less the time since.
			if rem, least := d.GetRemaining().AsDuration(), lockDelay-time.Since(sent); rem < least {
				t.Fatalf("remaining lock-delay %s, want at least %s (lock_delay %s, sent %s ago)", rem, least, lockDelay, time.Since(sent))
			}
			if li := lockOf(t, url, name); li.GetLease() != nil || li.GetLockDelayRemaining().AsDuration() <= 0 {
				t.Fatalf("Get %s = %v, want free with lockDelayRemaining", name, li)
			}

			// Expired without one: free at once.
			name = "ld-none-" + c.name
			if _, err := acquire(name, "A", fence.MinTTL, 0); err != nil {
				t.Fatal(err)
			}
			expired(t, url, name)
			if l, err := acquire(name, "B", time.Hour, 0); err != nil || l.GetOwner() != "B" {
				t.Fatalf("acquire of %s expired without lock_delay = %v, %v; want granted at once", name, l, err)
			}

			// Released with one: free at once.
			name = "ld-released-" + c.name
			a, err := acquire(name, "A", time.Hour, lockDelay)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: name, Token: a.GetToken()})); err != nil {
				t.Fatal(err)
			}
			if l, err := acquire(name, "B", time.Hour, 0); err != nil || l.GetOwner() != "B" {
				t.Fatalf("acquire of %s released with lock_delay = %v, %v; want granted at once (a release starts no lock-delay)", name, l, err)
			}
		})
	}

	// A plain JSON POST, as curl sends it: lockDelay, then the refusal's
	// facts and headers as a curl user reads them.
	t.Run("plain-json", func(t *testing.T) {
		const path = "/fence.v1.LockService/Acquire"
		name := "ld-expired-plain"
		if r := sendJSON(t, url, path, fmt.Sprintf(`{"name":%q,"owner":"A","ttl":"0.010s","lockDelay":"%.0fs"}`, name, lockDelay.Seconds())); r.status != http.StatusOK {
			t.Fatalf("acquire with lockDelay: status %d body %s", r.status, r.body)
		}
		expired(t, url, name)
		r := sendJSON(t, url, path, fmt.Sprintf(`{"name":%q,"owner":"B","ttl":"1h"}`, name))
		if r.status != http.StatusTooManyRequests || r.header.Get(apierr.HeaderReason) != string(fence.ReasonBusy) {
			t.Fatalf("acquire in the lock-delay: status %d, Fence-Reason %q, body %s; want 429 BUSY", r.status, r.header.Get(apierr.HeaderReason), r.body)
		}
		m := object(t, r)
		facts, _ := at(m, "facts").(map[string]any)
		delayed, _ := facts["delayed"].(bool)
		holder, _ := facts["holder"].(string)
		remaining, err := time.ParseDuration(fmt.Sprint(facts["remaining"]))
		if at(m, "code") != "resource_exhausted" || at(m, "reason") != string(fence.ReasonBusy) || err != nil {
			t.Fatalf("acquire in the lock-delay: body %s; want resource_exhausted, reason BUSY, facts.remaining a duration (%v)", r.body, err)
		}
		wantDelayed(t, "plain JSON acquire", name, delayed, holder, 0, remaining, r.header.Get(apierr.HeaderRetryAfter))
		if _, ok := facts["holderToken"]; ok {
			t.Fatalf("facts %v: a delayed lock has no holder token", facts)
		}
	})
}
