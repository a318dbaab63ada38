package node

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// Signed grants (state/keys.go, docs/design.md "Signed grants"). The state
// records which key signs each lease; the node that answers a grant makes
// the proof (fence.Sign, deterministic) from that key and the cluster id,
// outside the FSM's lock, so only the answering node pays for it. The
// first leader of a log without a key proposes one as it takes office
// (takeOffice), and a node is not ready until its state holds one.

// newKeySeed draws a signing key's seed.
func newKeySeed() ([]byte, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("node: signing key seed: %w", err)
	}
	return seed, nil
}

// NewKeySeed draws a signing key's seed (crypto/rand): for backup.Restore,
// which adds a fresh signing key to the state it restores.
func NewKeySeed() ([]byte, error) { return newKeySeed() }

// signLease sets l.Signed: l's token with the proof of its grant, signed by
// the key the state records for the lease if the state holds its seed (the
// signing key if the lease is over, has no key, or its key is public-only
// after a restore), or l's token alone when the state has no key or no
// cluster id yet. A set's lease (l.Locks) gets one proof per lock in
// l.Proofs, in Locks' order, all by the same key for the same token, each
// for its lock's name, and Signed is Proofs[0] (Name is Locks[0].Name): a
// guard of any lock of the set verifies that lock's proof. A shared or
// permit holder's lease is a lease like any other.
func (n *Node) signLease(l *fence.Lease) {
	var key ed25519.PrivateKey
	var clusterID string
	var ok bool
	n.fsm.read(func(m *state.Machine) { key, clusterID, ok = m.LeaseSigner(l.Name, l.Token) })
	signWith(key, clusterID, ok, l)
}

// signWith sets l's proofs (signLease) with key.
func signWith(key ed25519.PrivateKey, clusterID string, ok bool, l *fence.Lease) {
	sign := func(name string) fence.SignedToken {
		if !ok {
			return fence.SignedToken{Token: l.Token}
		}
		return fence.Sign(key, clusterID, name, l.Token)
	}
	if len(l.Locks) == 0 {
		l.Signed, l.Proofs = sign(l.Name), nil
		return
	}
	l.Proofs = make([]fence.SignedToken, len(l.Locks))
	for i, s := range l.Locks {
		l.Proofs[i] = sign(s.Name)
	}
	l.Signed = l.Proofs[0]
}

// KeySet is the applied state's public key set (state.Machine.KeySet): no
// secret.
func (n *Node) KeySet() *fence.KeySet {
	var ks *fence.KeySet
	n.fsm.read(func(m *state.Machine) { ks = m.KeySet() })
	return ks
}

// SigningKeys describes the applied state's keys (no private half).
func (n *Node) SigningKeys() []state.KeyInfo {
	var out []state.KeyInfo
	n.fsm.read(func(m *state.Machine) { out = m.SigningKeys() })
	return out
}

// RotateKey proposes a new signing key (its seed drawn here) and returns
// its id. The caller's principal (ctx) must be an admin once auth is
// bootstrapped.
func (n *Node) RotateKey(ctx context.Context) (string, error) {
	seed, err := newKeySeed()
	if err != nil {
		return "", err
	}
	res, err := outcome(n.Apply(ctx, state.Command{Op: state.OpKeyRotate, Value: seed}))
	return res.KeyID, err
}

// RetireKey proposes retiring key id: it is dropped once no live lease is
// signed by it; with now, at once (a leaked key), and the live leases it
// signed are signed by the signing key from then on (moved says how
// many). The signing key cannot be retired.
func (n *Node) RetireKey(ctx context.Context, id string, now bool) (moved int, err error) {
	cmd := state.Command{Op: state.OpKeyRetire, Name: id}
	if now {
		cmd.Delta = 1
	}
	res, err := outcome(n.Apply(ctx, cmd))
	return res.KeyLeases, err
}

// proposeFirstKey proposes, as a leader takes office, a signing key for a
// state without one (the only-if-none variant: two leaders racing add one
// key). It reports whether the state has a key or the proposal was applied.
func (n *Node) proposeFirstKey(ctx context.Context, c *leaderClock) error {
	seed, err := newKeySeed()
	if err != nil {
		return err
	}
	res, err := n.proposeUnlessClosed(ctx, c, &state.Command{Op: state.OpKeyRotate, Value: seed, Delta: 1})
	if err == nil {
		err = res.Err
	}
	if err == nil && res.KeyID != "" {
		n.cfg.Logger.Info("proposed the first signing key: the state has none", "key_id", res.KeyID)
	}
	return err
}

// verifySigned checks, before a write of the built-in store is proposed,
// the signed token it carries (if it carries a proof): the proof must hold
// under the applied state's key set for the lock named like the resource.
// A refusal is a *fence.ForgedTokenError; nothing is proposed.
func (n *Node) verifySigned(st fence.SignedToken, resource string) error {
	if !st.Signed() {
		if n.cfg.RequireSignedWrites && n.fsm.keyed.Load() {
			return &fence.ForgedTokenError{Token: st.Token, Name: resource,
				Reason: "no proof: this server takes signed writes only (--require-signed-writes); send the lease's signedToken"}
		}
		return nil
	}
	return n.KeySet().Verify(st, resource)
}
