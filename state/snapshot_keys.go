package state

import (
	"crypto/ed25519"
	"fmt"
	"slices"

	"github.com/fenceworks/fence/state/internal/statepb"
)

// The signing keys in a snapshot (keys.go): in the header, oldest first
// (the last is the signing key), each as its seed, status and the server
// time it was added — its id and public key are derived from the seed, and
// its count of live leases from the leases, which name their key by id
// (Grant.key). A public-only key (kept by a restore to verify, never to
// sign) has its public key instead of a seed. Absent while the store has
// no key, so a store without keys writes the bytes it wrote before keys
// existed. The cluster ids the store was restored from follow, newest
// first.

type snapKey struct {
	Seed    []byte
	Public  []byte // only without Seed
	Status  KeyStatus
	AddedAt int64
}

func (m *impl) snapKeys() ([]snapKey, []string) {
	var keys []snapKey
	for _, k := range m.keys.keys {
		sk := snapKey{Seed: k.seed, Status: k.status, AddedAt: k.addedAt}
		if k.seed == nil {
			sk.Public = k.pub
		}
		keys = append(keys, sk)
	}
	return keys, slices.Clone(m.keys.restoredFrom)
}

func pbKeys(keys []snapKey, from []string) ([]*statepb.SigningKey, [][]byte) {
	var pk []*statepb.SigningKey
	for _, k := range keys {
		pk = append(pk, &statepb.SigningKey{Seed: k.Seed, Status: uint32(k.Status), AddedAt: k.AddedAt, PublicKey: k.Public})
	}
	var pf [][]byte
	for _, id := range from {
		pf = append(pf, []byte(id))
	}
	return pk, pf
}

func keysOfPB(pk []*statepb.SigningKey, pf [][]byte) ([]snapKey, []string) {
	var keys []snapKey
	for _, k := range pk {
		keys = append(keys, snapKey{Seed: k.Seed, Public: k.PublicKey, Status: KeyStatus(k.Status), AddedAt: k.AddedAt})
	}
	var from []string
	for _, id := range pf {
		from = append(from, string(id))
	}
	return keys, from
}

// restoreKeys checks and installs a snapshot's keys (before its leases,
// which name them): a seed of the right size, or (public-only, never the
// signing key) a public key of the right size and no seed; distinct;
// exactly the last one the signing key, a status each; at most
// MaxRestoredKeys (a restore's fresh key may be beyond the cap).
func (m *impl) restoreKeys(doc *snapDoc) error {
	if len(doc.Keys) > MaxRestoredKeys || len(doc.RestoredFrom) > MaxRestoredFrom {
		return fmt.Errorf("%d signing keys, %d restored-from ids (at most %d, %d)", len(doc.Keys), len(doc.RestoredFrom), MaxRestoredKeys, MaxRestoredFrom)
	}
	for i, sk := range doc.Keys {
		last := i == len(doc.Keys)-1
		if (sk.Status == KeyActive) != last || sk.Status < KeyActive || sk.Status > KeyRetiring {
			return fmt.Errorf("signing key %d: status %s (the last key, and only it, is active)", i, sk.Status)
		}
		var k *signingKey
		switch {
		case len(sk.Seed) == 0 && sk.Status != KeyActive:
			if len(sk.Public) != ed25519.PublicKeySize {
				return fmt.Errorf("signing key %d: public-only, public key of %d bytes", i, len(sk.Public))
			}
			k = newPublicKey(sk.Public, sk.Status, sk.AddedAt)
		case len(sk.Seed) != ed25519.SeedSize:
			return fmt.Errorf("signing key %d: seed of %d bytes (the signing key needs its seed)", i, len(sk.Seed))
		case len(sk.Public) != 0:
			return fmt.Errorf("signing key %d: both a seed and a public key", i)
		default:
			k = newSigningKey(sk.Seed, sk.Status, sk.AddedAt)
		}
		if m.keys.find(k.id) != nil {
			return fmt.Errorf("signing key %q repeated", k.id)
		}
		m.keys.keys = append(m.keys.keys, k)
	}
	for _, id := range doc.RestoredFrom {
		if err := ValidateClusterID(id); err != nil {
			return fmt.Errorf("restored_from: %v", err)
		}
	}
	m.keys.restoredFrom = slices.Clone(doc.RestoredFrom)
	return nil
}

// restoreLeaseKey links a restored lease to the key it names and counts it.
func (m *impl) restoreLeaseKey(g *grant, id string) error {
	if id == "" {
		return nil
	}
	k := m.keys.find(id)
	if k == nil {
		return fmt.Errorf("lease signed by unknown key %q", id)
	}
	g.key = k
	k.leases++
	return nil
}

// checkKeyLeases refuses a retiring key whose proofs are over (it would
// have been dropped when they ended: dropRetired).
func (m *impl) checkKeyLeases() error {
	waiting := m.publicOnlyLeases() > 0
	for _, k := range m.keys.keys {
		if k.status == KeyRetiring && k.leases == 0 && (k.priv == nil || !waiting) {
			return fmt.Errorf("signing key %q is retiring but signs no live lease", k.id)
		}
	}
	return nil
}
