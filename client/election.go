package client

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/fenceworks/fence"
)

// Election is leader election over one lock, in the shape of etcd's
// concurrency.Election: Campaign blocks until this client leads, Proclaim
// sets the leader's value, Observe follows the leader, Resign steps down.
//
// The leader is the holder of the lock named like the election, and its
// value is the fenced resource of the same name in the built-in store,
// written with the leader's token: a leader that lost its lease (a pause
// past its end, a network cut) and wakes after another took over has its
// Proclaim refused by the store (fence.ErrStaleToken), exactly as any
// fenced write. Every leader's token is larger than every earlier leader's,
// so a follower that sees a leader's token can hand it to a guard.
type Election struct {
	c    *Client
	name string

	mu    sync.Mutex
	lease *Lease // this client's leadership, nil when it does not lead
}

// Election returns the election named name (a lock name and a resource
// name: the lock's permission is needed to campaign and resign, the
// resource's write permission to proclaim, read to observe).
func (c *Client) Election(name string) *Election { return &Election{c: c, name: name} }

// Leader is an election's leader as observed: its lease's token and owner,
// and the value it proclaimed (nil until it proclaims one). Token 0: no
// leader. Err (Observe's last value only) says why observing ended.
type Leader struct {
	Token fence.Token
	Owner string
	Value []byte
	Err   error
}

// ErrNoLeader: the election has no leader now.
var ErrNoLeader = errors.New("fence: election has no leader")

// Campaign blocks until this client leads the election, then proclaims
// value, and returns the lease: its token fences what the leader does,
// and Lease.Done says when leadership is lost (the lease ended). It waits
// in rounds of the longest wait the server allows until ctx ends; opts
// are the acquire's (TTL, Owner, ...; a Wait among them is the length of
// each round). A client that leads already gets its lease back.
func (e *Election) Campaign(ctx context.Context, value []byte, opts ...AcquireOption) (*Lease, error) {
	e.mu.Lock()
	if l := e.lease; l != nil && l.Err() == nil {
		e.mu.Unlock()
		return l, nil
	}
	e.mu.Unlock()
	opts = append([]AcquireOption{Wait(fence.MaxWait)}, opts...)
	for {
		l, err := e.c.Acquire(ctx, e.name, opts...)
		var busy *fence.BusyError
		if errors.As(err, &busy) && busy.Waited && ctx.Err() == nil {
			continue // a round's wait ran out: campaign on
		}
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.lease = l
		e.mu.Unlock()
		if err := e.proclaim(ctx, l, value); err != nil {
			return l, err
		}
		return l, nil
	}
}

// Proclaim sets the leader's value without another election. It is a
// fenced write with this client's leadership token: refused with
// ErrNoLeader when this client never led or resigned, ErrLeaseLost when
// its lease is known lost, and by the store (fence.ErrStaleToken) once a
// newer leader has proclaimed. The store compares tokens only: between a
// newer leader's grant and its first proclaim (Campaign proclaims right
// after its grant) it cannot tell a deposed leader's write with an older
// token from the last leader's; a follower reads the value with Leader or
// Observe, which show a value only when the leader that wrote it leads.
func (e *Election) Proclaim(ctx context.Context, value []byte) error {
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	if l == nil {
		return ErrNoLeader
	}
	// A lease this client already knows is lost (its safe deadline passed
	// without a renewal: a pause, a cut) does not write at all: between a
	// new leader's grant and its first proclaim the store would still take
	// the old token (an outside test wrote a deposed leader's value in that
	// window).
	if err := l.Err(); err != nil {
		return err
	}
	return e.proclaim(ctx, l, value)
}

func (e *Election) proclaim(ctx context.Context, l *Lease, value []byte) error {
	_, err := e.c.Write(ctx, e.name, l.Token(), value, Signed(l.SignedToken()))
	return err
}

// Resign gives up leadership: the lease is released and the next
// campaigner is granted the lock. A client that does not lead does
// nothing.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.lease
	e.lease = nil
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	if err := l.Release(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
		return err
	}
	return nil
}

// Leader returns the election's leader now (ErrNoLeader when the lock is
// free). Its Value is the one it proclaimed: nil while the value in the
// store is an earlier leader's.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	li, err := e.c.Get(ctx, e.name)
	if err != nil {
		return Leader{}, err
	}
	if li.Lease == nil {
		return Leader{}, ErrNoLeader
	}
	ld := Leader{Token: li.Lease.Token, Owner: li.Lease.Owner}
	r, err := e.c.Read(ctx, e.name)
	if err != nil {
		return Leader{}, err
	}
	if r.LastToken == ld.Token && !r.Deleted {
		ld.Value = r.Value
	}
	return ld, nil
}

// sameLeader reports whether a and b are the same leader with the same
// value.
func sameLeader(a, b Leader) bool {
	return a.Token == b.Token && a.Owner == b.Owner && bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil)
}

// Observe follows the election: it sends the leader now, then each time it
// changes — a new leader (a new token), a new proclaimed value, or no
// leader (Token 0) — until ctx ends. It follows the election's lock and
// resource with Watch, which resumes across reconnects and failovers; the
// last value sent, after ctx ends or when the watch cannot go on
// (permission denied), has Err set, and then the channel is closed.
//
// The leaders are the watch's own: each grant of the lock is sent, in log
// order, with the owner the grant names, however soon that leader resigned
// — through a follower as through the leader. Tokens never go back. A value
// is read from the store when the watch shows the leader's write (the watch
// carries no values), and is sent only while the store holds a value
// written with that leader's token: a leader whose successor was granted
// and proclaimed before that read is sent without its value (a leader that
// lived shorter than one read). When the election stops changing, the last
// value sent is its leader and that leader's value.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader, 1)
	go func() {
		defer close(out)
		send := func(ld Leader) bool {
			select {
			case out <- ld:
				return true
			case <-ctx.Done():
				return false
			}
		}
		events, err := e.c.Watch(ctx, e.name, WatchName())
		if err != nil {
			send(Leader{Err: err})
			return
		}
		var cur, last Leader // the leader as the watch has it; the last one sent
		sent := false
		for ev := range events {
			if ev.Err != nil {
				send(Leader{Err: ev.Err})
				return
			}
			switch ch := ev.Change; {
			case ev.State != nil:
				// The state, first or after a resume whose history is
				// gone: its holder, and the value if it is that holder's.
				cur = Leader{}
				for _, l := range ev.State.Locks {
					if l.Name == e.name && len(l.Holders) > 0 {
						cur = Leader{Token: l.Holders[0].Token, Owner: l.Holders[0].Owner}
					}
				}
				cur.Value = e.valueOf(ctx, cur.Token)
			case ch == nil || ch.Name != e.name:
				continue
			case ch.Kind == "granted" && ch.Token > cur.Token:
				cur = Leader{Token: ch.Token, Owner: ch.Owner}
			case (ch.Kind == "released" || ch.Kind == "expired") && ch.Token == cur.Token:
				cur = Leader{}
			case ch.Kind == "written" && ch.Token == cur.Token && cur.Token != 0:
				// The leader wrote (proclaimed): read the value, if the
				// store still holds this leader's.
				v := e.valueOf(ctx, cur.Token)
				if v == nil {
					continue // a newer leader's write came first: its grant follows
				}
				cur.Value = v
			default:
				continue
			}
			if sent && sameLeader(cur, last) {
				continue
			}
			if !send(cur) {
				break
			}
			last, sent = cur, true
		}
		send(Leader{Err: ctx.Err()})
	}()
	return out
}

// valueOf reads the election's value when the store's last write was made
// with token (nil otherwise, for token 0, or when the read fails).
func (e *Election) valueOf(ctx context.Context, token fence.Token) []byte {
	if token == 0 {
		return nil
	}
	r, err := e.c.Read(ctx, e.name)
	if err != nil || r.LastToken != token || r.Deleted {
		return nil
	}
	return r.Value
}
