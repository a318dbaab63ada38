package client

import (
	"context"
	"errors"
	"time"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// acquire takes lock name on the session: the lease lives while the
// session lives, with no keepalive of its own. A waiting acquire waits on
// the server without holding back other calls of the stream.
func (s *session) acquire(ctx context.Context, name string, cfg acquireConfig, ownID bool) (*Lease, error) {
	ar := cfg.req
	ar.TTL = 0 // the lease lasts as long as the session
	if ownID {
		ar.RequestID = "" // not the caller's own key: the server uses (session, seq)
	}
	req := acquireToProto(ar)
	var r *fencev1.SessionReply
	var gen uint64
	for {
		var err error
		r, gen, err = s.call(ctx, "acquire", &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Acquire{Acquire: req}}, true)
		if err == nil {
			break
		}
		if ownID && grantEnded(err) {
			// Only a resend after a reconnect can hear this: the first
			// send was granted and that lease ended since (the server
			// releases a grant whose stream ended before its reply went
			// out). We never held it: ask again, with a new seq.
			continue
		}
		return nil, err
	}
	granted := leaseFromProto(r.GetAcquire().GetLease())
	// A session lease is an entry of its session's map and nothing else:
	// no goroutine, timer, channel or context until asked for (its TTL
	// and deadline are the session's).
	l := &Lease{
		c: s.c, name: granted.Name, owner: s.c.shareOwner(granted.Owner), token: granted.Token,
		sess: s, gen: gen,
	}
	l.setProof(granted.Signed)
	l.setHeld(granted)
	if l.name == "" {
		l.name = name
	}
	if err := s.adopt(l); err != nil {
		return nil, err
	}
	return l, nil
}

// release frees lock name held by token through the session's stream.
func (s *session) release(ctx context.Context, name string, token fence.Token) error {
	req := &fencev1.ReleaseRequest{Name: name, Token: uint64(token)}
	_, _, err := s.call(ctx, "release", &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Release{Release: req}}, true)
	return err
}

// renewLease renews a lease of the session: the server checks that the
// lease is still held and extends the session. A refusal ends the lease.
func (s *session) renewLease(ctx context.Context, l *Lease) error {
	sent := time.Now()
	req := &fencev1.RenewRequest{Name: l.name, Token: uint64(l.token)}
	r, gen, err := s.call(ctx, "renew", &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Renew{Renew: req}}, true)
	if err != nil {
		if fence.ReasonOf(err) != "" && !errors.Is(err, fence.ErrSessionExpired) {
			l.stop(&LostError{Name: l.name, Token: l.token, Cause: err})
		}
		if lost := l.Err(); lost != nil {
			return lost
		}
		return err
	}
	if gen == l.gen {
		s.extend(gen, sent, nil, r.GetRenew().GetLease().GetRemaining().AsDuration())
	}
	// A renew hands back the lease's proof: the grant's own while its key
	// lives, the signing key's once that key was retired --now (a leak) —
	// then the old one names a key no guard knows: keep the new one.
	renewed := leaseFromProto(r.GetRenew().GetLease())
	l.resign(renewed.Signed)
	l.mu.Lock()
	if l.err == nil {
		l.reproof(renewed.Proofs)
	}
	l.mu.Unlock()
	return l.Err()
}

// resourceCall sends a Write, Add or Delete through the session's stream.
func (s *session) resourceCall(ctx context.Context, op string, req *fencev1.SessionRequest) (*fencev1.SessionReply, error) {
	r, _, err := s.call(ctx, op, req, true)
	return r, err
}

// useSession reports whether err says to take the unary path instead: the
// Client has no session, or the server does not support sessions.
func useUnary(err error) bool { return errors.Is(err, errNoSessions) }
