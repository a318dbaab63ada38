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
// the lease was granted; a renew moves the lease to the signing key of
// then. The proof itself (fence.Sign of the lease's name and token under
// the store's cluster id) is made outside the machine, by the node that
// answers: it is a pure function of the state (Ed25519 is deterministic),
// so every replica, replay and restore that signs a grant makes the same
// bytes (R1) and only the answering node pays for it.
//
// Exactly one key, the last added, is the signing key (KeyActive); older
// ones only verify (KeyVerifyOnly) until retired. OpKeyRetire marks a key
// KeyRetiring (never the signing key); a retiring key is dropped — from
// the state and from the published key set — as soon as no live lease is
// signed by it (at once when none is). The machine counts the live leases
// of each key (derived state: restore recounts it from the leases).
// Snapshots keep the keys (so backups do: a backup file holds the private
// seeds) and the cluster ids the store was restored from.

// The key operations. Their numbers are part of the log format.
const (
	// OpKeyRotate: Value is a new key's seed (ed25519.SeedSize bytes); it
	// becomes the signing key and the one before it verify-only. Delta != 0
	// is the leader's start-up proposal: applied only if the state has no
	// key yet (a no-op otherwise, so two leaders racing add one key), and
	// it needs no admin. Result.KeyID is the new key's id ("" for a no-op).
	OpKeyRotate Op = 22
	// OpKeyRetire: Name is a key id; the key is retired (dropped once no
	// live lease is signed by it). The signing key cannot be. Result.KeyID
	// is the key's id.
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
// refused (RESOURCE_EXHAUSTED) until a key is retired and dropped.
const MaxSigningKeys = 64

// MaxRestoredFrom bounds the cluster ids a state remembers it was restored
// from (the oldest is forgotten first).
const MaxRestoredFrom = 64

// KeyInfo describes one signing key (never its private half).
type KeyInfo struct {
	ID      string            // fence.KeyIDOf(Public)
	Public  ed25519.PublicKey // the key's public half
	Status  KeyStatus
	AddedAt int64 // server time of the command that added it
	Leases  int   // live leases signed by it
}

// signingKey is one key of the state. priv and id are derived from seed;
// leases is derived from the leases (restore recounts it).
type signingKey struct {
	seed    []byte
	priv    ed25519.PrivateKey
	id      string
	status  KeyStatus
	addedAt int64
	leases  int
}

func newSigningKey(seed []byte, status KeyStatus, at int64) *signingKey {
	priv := ed25519.NewKeyFromSeed(seed)
	return &signingKey{seed: slices.Clone(seed), priv: priv, id: fence.KeyIDOf(priv.Public().(ed25519.PublicKey)), status: status, addedAt: at}
}

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
	id, err := m.addKey(cmd.Value)
	return Result{KeyID: id, Err: err}
}

// addKey makes seed the signing key (the one before it verify-only).
func (m *impl) addKey(seed []byte) (string, error) {
	if len(m.keys.keys) >= MaxSigningKeys {
		return "", fence.Exhausted("signing keys", "at most "+strconv.Itoa(MaxSigningKeys)+" (retire one)", strconv.Itoa(len(m.keys.keys)))
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
		return Result{Err: fence.Invalid("key_id", "not the signing key (rotate first)", strconv.Quote(cmd.Name))}
	}
	k.status = KeyRetiring
	m.dropRetired(k)
	return Result{KeyID: k.id}
}

// dropRetired drops k if it is retiring and signs no live lease.
func (m *impl) dropRetired(k *signingKey) {
	if k.status != KeyRetiring || k.leases > 0 {
		return
	}
	if i := slices.Index(m.keys.keys, k); i >= 0 {
		m.keys.keys = slices.Delete(m.keys.keys, i, i+1)
	}
}

// signWith records that g is signed by the signing key (nil before any
// key exists), moving it off the key that signed it before.
func (m *impl) signWith(g *grant) {
	k := m.keys.signing()
	if g.key == k {
		return
	}
	m.unsign(g)
	if g.key = k; k != nil {
		k.leases++
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
}

// HasSigningKey reports whether the state has a signing key (a grant
// applied before any key exists carries no proof).
func (m *Machine) HasSigningKey() bool { return m.keys.signing() != nil }

// SigningKeys describes the keys, in the order they were added (the last
// is the signing key).
func (m *Machine) SigningKeys() []KeyInfo {
	out := make([]KeyInfo, 0, len(m.keys.keys))
	for _, k := range m.keys.keys {
		out = append(out, KeyInfo{ID: k.id, Public: k.priv.Public().(ed25519.PublicKey), Status: k.status, AddedAt: k.addedAt, Leases: k.leases})
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
		ks.Keys = append(ks.Keys, fence.PublicKey{ID: k.id, Key: k.priv.Public().(ed25519.PublicKey)})
	}
	return ks
}

// LeaseSigner returns what signs the lease of lock name with token: the
// key the state records for it while that lease is held, otherwise (the
// lease is over — a replayed grant — or was granted before any key
// existed) the signing key; and the cluster id the proof names. ok is
// false when there is no such key or no cluster id yet: the grant goes
// unsigned. The caller signs with fence.Sign(key, clusterID, name, token).
func (m *Machine) LeaseSigner(name string, token fence.Token) (key ed25519.PrivateKey, clusterID string, ok bool) {
	k := m.keys.signing()
	if l := m.byName[name]; l != nil && l.holder != nil && l.holder.token == token && l.holder.key != nil {
		k = l.holder.key
	}
	if k == nil || m.clusterID == "" {
		return nil, "", false
	}
	return k.priv, m.clusterID, true
}

// AddRestoredKey adds a fresh signing key (seed drawn by the caller) to a
// machine restored from a backup, keeping every key it had (their proofs
// still verify), and moves every live lease to it: from the restore on,
// every proof the restored cluster makes is by a key the backed-up
// cluster's guards never learned (and a second cluster restored from the
// same backup draws another). For backup.Restore only, on a machine no
// replica runs, like SetRestoredClusterID.
func (m *Machine) AddRestoredKey(seed []byte) (string, error) {
	if len(seed) != ed25519.SeedSize {
		return "", fence.Invalid("seed", fmt.Sprintf("%d bytes", ed25519.SeedSize), strconv.Itoa(len(seed))+" bytes")
	}
	if len(m.keys.keys) >= MaxSigningKeys {
		// Make room: the oldest key that signs no live lease goes.
		for _, k := range m.keys.keys {
			if k.status != KeyActive && k.leases == 0 {
				k.status = KeyRetiring
				m.dropRetired(k)
				break
			}
		}
	}
	id, err := m.addKey(seed)
	if err != nil {
		return "", err
	}
	for _, l := range m.byName { // the order decides nothing: counts only
		if l.holder != nil {
			m.signWith(l.holder)
		}
	}
	return id, nil
}
