package state

import (
	"crypto/ed25519"
	"fmt"
	"slices"
	"strconv"

	"github.com/fenceworks/fence"
)

// Signing keys (issue 22, docs/design.md "Signed grants"). The state holds
// the cluster's Ed25519 signing keys — each a 32-byte seed drawn by the node
// that proposed it (crypto/rand), never by the machine — and records, with
// every lease, which key signs it: the key that was the signing key when
// the lease was granted, for the lease's whole life (a renew does not move
// it: its holder keeps the proof it was handed, which may be all it has —
// a `fence run` child got FENCE_SIGNED_TOKEN once). The proof itself
// (fence.Sign of the lease's name and token under the store's cluster id)
// is made outside the machine, by the node that answers: it is a pure
// function of the state (Ed25519 is deterministic), so every replica,
// replay and restore that signs a grant makes the same bytes (R1) and only
// the answering node pays for it.
//
// The proof rule (LeaseSigner): a lease is signed by its key when the
// state holds that key's seed, else by the signing key. A key has no seed
// when it came back public-only from a restore (backup.Restore keeps the
// backed-up cluster's keys to verify, never to sign: a staging cluster
// restored from production must not sign what production's guards accept).
//
// Exactly one key, the last added, is the signing key (KeyActive); older
// ones only verify (KeyVerifyOnly) until retired. OpKeyRetire marks a key
// KeyRetiring (never the signing key); a retiring key is dropped — from
// the state and from the published key set — as soon as no live lease is
// signed by it (at once when none is). Its forced variant (Delta != 0,
// `fence keys retire --now`, for a leaked key) drops the key at once and
// moves the live leases it signed to the signing key: their holders' old
// proofs stop verifying where the guards reload the key set. The machine
// counts the live leases of each key (derived state: restore recounts it
// from the leases). Snapshots keep the keys (so backups do: a backup file
// holds the private seeds) and the cluster ids the store was restored
// from.

// The key operations. Their numbers are part of the log format.
const (
	// OpKeyRotate: Value is a new key's seed (ed25519.SeedSize bytes); it
	// becomes the signing key and the one before it verify-only. Delta != 0
	// is the leader's start-up proposal: applied only if the state has no
	// key yet (a no-op otherwise, so two leaders racing add one key), and
	// it needs no admin. Result.KeyID is the new key's id ("" for a no-op).
	OpKeyRotate Op = 22
	// OpKeyRetire: Name is a key id; the key is retired (dropped once no
	// live lease is signed by it). The signing key cannot be. Delta != 0
	// (`fence keys retire --now`): dropped at once, its live leases moved
	// to the signing key (Result.KeyLeases says how many). Result.KeyID is
	// the key's id.
	OpKeyRetire Op = 23
)

// KeyStatus is a signing key's state.
type KeyStatus uint8

// The statuses. Their numbers are part of the snapshot format.
const (
	KeyActive     KeyStatus = 1 // the signing key: signs every new grant and renewal
	KeyVerifyOnly KeyStatus = 2 // an older key: its proofs still verify
	KeyRetiring   KeyStatus = 3 // retired: dropped once no live lease is signed by it
)

func (s KeyStatus) String() string {
	switch s {
	case KeyActive:
		return "active"
	case KeyVerifyOnly:
		return "verify-only"
	case KeyRetiring:
		return "retiring"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// MaxSigningKeys bounds the keys a state holds: a rotation beyond it is
// refused (RESOURCE_EXHAUSTED) until a key is retired and dropped. A
// restore may go one beyond it with its fresh key (AddRestoredKey), so a
// snapshot holds at most MaxSigningKeys+1.
const MaxSigningKeys = 64

// MaxRestoredFrom bounds the cluster ids a state remembers it was restored
// from (the oldest is forgotten first).
const MaxRestoredFrom = 64

// MaxRestoredKeys bounds the keys a restore may leave: each restore adds
// one fresh key, beyond MaxSigningKeys if every older key still signs a
// live lease (a backup must restore whatever its leases: an outside test
// could not restore a store of 65 keys, each with a live lease). Rotations
// stay bounded by MaxSigningKeys.
const MaxRestoredKeys = MaxSigningKeys + MaxRestoredFrom

// KeyInfo describes one signing key (never its private half).
type KeyInfo struct {
	ID      string            // fence.KeyIDOf(Public)
	Public  ed25519.PublicKey // the key's public half
	Status  KeyStatus
	AddedAt int64 // server time of the command that added it
	Leases  int   // live leases signed by it
	// PublicOnly: the state holds no seed of it (a key of the backed-up
	// cluster, kept by a restore to verify): it never signs.
	PublicOnly bool
}

// signingKey is one key of the state. priv, pub and id are derived from
// seed; a public-only key (seed and priv nil) has pub alone. leases is
// derived from the leases (restore recounts it).
type signingKey struct {
	seed    []byte
	priv    ed25519.PrivateKey
	pub     ed25519.PublicKey
	id      string
	status  KeyStatus
	addedAt int64
	leases  int
}

func newSigningKey(seed []byte, status KeyStatus, at int64) *signingKey {
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	return &signingKey{seed: slices.Clone(seed), priv: priv, pub: pub, id: fence.KeyIDOf(pub), status: status, addedAt: at}
}

func newPublicKey(pub []byte, status KeyStatus, at int64) *signingKey {
	p := ed25519.PublicKey(slices.Clone(pub))
	return &signingKey{pub: p, id: fence.KeyIDOf(p), status: status, addedAt: at}
}

// forget drops k's private half: it verifies, never signs.
func (k *signingKey) forget() { k.seed, k.priv = nil, nil }

// keyState is the machine's keys, in the order they were added (the last
// is the signing key), and the cluster ids it was restored from, newest
// first.
type keyState struct {
	keys         []*signingKey
	restoredFrom []string
}

// signing is the signing key, nil when there is none yet.
func (k *keyState) signing() *signingKey {
	if n := len(k.keys); n > 0 && k.keys[n-1].status == KeyActive {
		return k.keys[n-1]
	}
	return nil
}

func (k *keyState) find(id string) *signingKey {
	for _, s := range k.keys {
		if s.id == id {
			return s
		}
	}
	return nil
}

// keyRotate applies OpKeyRotate.
func (m *impl) keyRotate(cmd Command) Result {
	if cmd.Delta == 0 {
		if err := m.needAdmin(cmd); err != nil {
			return Result{Err: err}
		}
	}
	if len(cmd.Value) != ed25519.SeedSize {
		return Result{Err: fence.Invalid("value", fmt.Sprintf("a key seed of %d bytes", ed25519.SeedSize), strconv.Itoa(len(cmd.Value))+" bytes")}
	}
	if cmd.Delta != 0 && len(m.keys.keys) > 0 {
		return Result{}
	}
	id, err := m.addKey(cmd.Value, MaxSigningKeys)
	return Result{KeyID: id, Err: err}
}

// addKey makes seed the signing key (the one before it verify-only), if
// the state holds fewer than limit keys.
func (m *impl) addKey(seed []byte, limit int) (string, error) {
	if len(m.keys.keys) >= limit {
		return "", fence.Exhausted("signing keys", "at most "+strconv.Itoa(limit)+" (retire one)", strconv.Itoa(len(m.keys.keys)))
	}
	k := newSigningKey(seed, KeyActive, m.clock)
	if m.keys.find(k.id) != nil {
		return "", fence.Invalid("value", "the seed of a new key", "the seed of key "+strconv.Quote(k.id))
	}
	if s := m.keys.signing(); s != nil {
		s.status = KeyVerifyOnly
	}
	m.keys.keys = append(m.keys.keys, k)
	return k.id, nil
}

// keyRetire applies OpKeyRetire.
func (m *impl) keyRetire(cmd Command) Result {
	if err := m.needAdmin(cmd); err != nil {
		return Result{Err: err}
	}
	k := m.keys.find(cmd.Name)
	switch {
	case k == nil:
		return Result{Err: fence.Invalid("key_id", "the id of a key of this store", strconv.Quote(cmd.Name))}
	case k.status == KeyActive:
		// Also with --now: every grant needs a key that signs, so the
		// signing key is retired only after a rotation made another.
		return Result{Err: fence.Invalid("key_id", "not the signing key (rotate first: fence keys rotate makes a new one, then retire this one)", strconv.Quote(cmd.Name))}
	}
	k.status = KeyRetiring
	if cmd.Delta == 0 {
		m.dropRetired(k)
		return Result{KeyID: k.id}
	}
	// --now: every live lease it signs moves to the signing key (there is
	// one: k is not it, and a state with keys has one), and k goes. The
	// order of the walk decides nothing: counts and pointers only.
	moved := k.leases
	if moved > 0 {
		s := m.keys.signing()
		m.names.each(func(l *lockEntry) {
			for _, g := range l.holders {
				if g.key == k { // a set's lease is moved at its first lock, then no longer k's
					g.key = s
					s.leases++
				}
			}
		})
		k.leases = 0
	}
	m.removeKey(k) // at once, whatever proofs it made
	return Result{KeyID: k.id, KeyLeases: moved}
}

// dropRetired drops k if it is retiring and its proofs are over: it signs
// no live lease, and — if it could sign (it has a seed) — no live lease is
// under a public-only key either. Such leases (a restore's) get their
// proofs from whichever key signed when they were handed out, which the
// state does not record: a key that may have made one waits for them all
// (an outside test had a renewed lease's proof, by a restore's fresh key,
// refused after a plain retire of that key).
func (m *impl) dropRetired(k *signingKey) {
	if k.status != KeyRetiring || k.leases > 0 {
		return
	}
	if k.priv != nil && m.publicOnlyLeases() > 0 {
		return
	}
	m.removeKey(k)
}

// removeKey drops k from the keys.
func (m *impl) removeKey(k *signingKey) {
	if i := slices.Index(m.keys.keys, k); i >= 0 {
		m.keys.keys = slices.Delete(m.keys.keys, i, i+1)
	}
}

// publicOnlyLeases counts the live leases under keys without a seed.
func (m *impl) publicOnlyLeases() int {
	n := 0
	for _, k := range m.keys.keys {
		if k.priv == nil {
			n += k.leases
		}
	}
	return n
}

// dropIdleRetired drops every retiring key whose proofs are over
// (dropRetired), once the last lease under a public-only key ended.
func (m *impl) dropIdleRetired() {
	for _, k := range slices.Clone(m.keys.keys) {
		m.dropRetired(k)
	}
}

// signWith records that g, a new grant, is signed by the signing key (nil
// before any key exists). A lease keeps that key for its whole life.
func (m *impl) signWith(g *grant) {
	if g.key = m.keys.signing(); g.key != nil {
		g.key.leases++
	}
}

// signIfUnsigned records, at a renew, the signing key for a lease granted
// before any key existed (its holder had the bare token; the renew hands
// it a proof). A lease that has a key keeps it: a renew never moves it,
// since its holder may keep the proof of its grant for the lease's life.
func (m *impl) signIfUnsigned(g *grant) {
	if g.key == nil {
		m.signWith(g)
	}
}

// unsign records that g's lease is over: its key signs one lease less, and
// is dropped if it was retiring and that was its last.
func (m *impl) unsign(g *grant) {
	k := g.key
	if k == nil {
		return
	}
	g.key = nil
	k.leases--
	m.dropRetired(k)
	if k.priv == nil && m.publicOnlyLeases() == 0 {
		m.dropIdleRetired()
	}
}

// HasSigningKey reports whether the state has a signing key (a grant
// applied before any key exists carries no proof).
func (m *Machine) HasSigningKey() bool { return m.keys.signing() != nil }

// SigningKeys describes the keys, in the order they were added (the last
// is the signing key).
func (m *Machine) SigningKeys() []KeyInfo {
	out := make([]KeyInfo, 0, len(m.keys.keys))
	for _, k := range m.keys.keys {
		out = append(out, KeyInfo{ID: k.id, Public: k.pub, Status: k.status, AddedAt: k.addedAt, Leases: k.leases, PublicOnly: k.priv == nil})
	}
	return out
}

// RestoredFrom lists the cluster ids the store was restored from, newest
// first.
func (m *Machine) RestoredFrom() []string { return slices.Clone(m.keys.restoredFrom) }

// KeySet is the public key set that verifies the store's proofs: every
// key it holds (signing, verify-only and retiring), the cluster id and
// the ids it was restored from. It holds no secret.
func (m *Machine) KeySet() *fence.KeySet {
	ks := &fence.KeySet{ClusterID: m.clusterID, RestoredFrom: m.RestoredFrom()}
	for _, k := range m.keys.keys {
		ks.Keys = append(ks.Keys, fence.PublicKey{ID: k.id, Key: k.pub})
	}
	return ks
}

// LeaseSigner returns what signs the lease of lock name with token: the
// key the state records for it while that lease is held, if the state
// holds that key's seed; otherwise (the lease is over — a replayed grant
// —, was granted before any key existed, or its key is public-only after
// a restore) the signing key; and the cluster id the proof names. ok is
// false when there is no such key or no cluster id yet: the grant goes
// unsigned. The caller signs with fence.Sign(key, clusterID, name, token).
func (m *Machine) LeaseSigner(name string, token fence.Token) (key ed25519.PrivateKey, clusterID string, ok bool) {
	k := m.keys.signing()
	if l := m.names.get(name); l != nil {
		if g := l.holderWith(token); g != nil && g.key != nil && g.key.priv != nil {
			k = g.key
		}
	}
	if k == nil || m.clusterID == "" {
		return nil, "", false
	}
	return k.priv, m.clusterID, true
}

// AddRestoredKey makes a machine restored from a backup sign with a fresh
// key (seed drawn by the caller) and forgets the private half of every key
// it had: they stay, public-only, so proofs made before the backup still
// verify, but they never sign again — a staging cluster restored from a
// production backup cannot make a proof production's guards accept, and a
// second cluster restored from the same backup draws another key. Live
// leases keep their key and its count (so a retire of an old key still
// waits for them); their proofs from now on are by the signing key
// (LeaseSigner). The fresh key may be one beyond MaxSigningKeys; at
// MaxSigningKeys+1 already (a restored store restored again), the oldest
// key that signs no live lease goes first. For backup.Restore only, on a
// machine no replica runs, like SetRestoredClusterID.
func (m *Machine) AddRestoredKey(seed []byte) (string, error) {
	if len(seed) != ed25519.SeedSize {
		return "", fence.Invalid("seed", fmt.Sprintf("%d bytes", ed25519.SeedSize), strconv.Itoa(len(seed))+" bytes")
	}
	if len(m.keys.keys) > MaxSigningKeys {
		// Make room: the oldest key whose proofs are over goes (it signs
		// no live lease, nor may have signed one under a public-only
		// key: dropRetired's rule).
		waiting := m.publicOnlyLeases() > 0
		for _, k := range m.keys.keys {
			if k.status != KeyActive && k.leases == 0 && (k.priv == nil || !waiting) {
				m.removeKey(k)
				break
			}
		}
	}
	id, err := m.addKey(seed, MaxRestoredKeys)
	if err != nil {
		return "", err
	}
	for _, k := range m.keys.keys[:len(m.keys.keys)-1] {
		k.forget()
	}
	return id, nil
}
