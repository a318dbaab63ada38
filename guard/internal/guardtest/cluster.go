package guardtest

import (
	"crypto/ed25519"
	"crypto/sha256"

	"github.com/fenceworks/fence"
)

// Cluster is a made-up Fence cluster for tests: its id and one signing key
// drawn from a seed named by the cluster, so every run signs the same.
type Cluster struct {
	ID  string
	Key ed25519.PrivateKey
}

// NewCluster returns the test cluster id whose key is derived from seed.
func NewCluster(id, seed string) Cluster {
	s := sha256.Sum256([]byte("guardtest key " + seed))
	return Cluster{ID: id, Key: ed25519.NewKeyFromSeed(s[:])}
}

// Sign returns the cluster's proof of granting token on lock.
func (c Cluster) Sign(lock string, token fence.Token) fence.SignedToken {
	return fence.Sign(c.Key, c.ID, lock, token)
}

// Public returns the cluster's public key as a KeySet holds it.
func (c Cluster) Public() fence.PublicKey {
	pub := c.Key.Public().(ed25519.PublicKey)
	return fence.PublicKey{ID: fence.KeyIDOf(pub), Key: pub}
}

// KeySet returns the key set a guard of this cluster is given.
func (c Cluster) KeySet() *fence.KeySet {
	return &fence.KeySet{ClusterID: c.ID, Keys: []fence.PublicKey{c.Public()}}
}

// Prod and Staging are the two clusters of the signed tests: a guard is
// given Prod's key set; Staging is a cluster it never learned.
var (
	Prod    = NewCluster("prod", "prod")
	Staging = NewCluster("staging", "staging")
)

// Forgery is one token a guard holding Prod's key set must refuse for a
// resource, and what it is.
type Forgery struct {
	Name  string
	Token fence.SignedToken
}

// Forgeries returns the tokens a guard with Prod's key set refuses as
// forged at lock (each above next, so a guard without keys would accept
// them): a tampered token number, a flipped signature byte, a proof for
// another lock, another cluster's proof, Prod's id on a key it does not
// have, and a huge never-issued token with no proof and with a made-up one.
func Forgeries(lock string, next fence.Token) []Forgery {
	tampered := Prod.Sign(lock, next)
	tampered.Token = next + 1
	flipped := Prod.Sign(lock, next)
	flipped.Signature = append([]byte(nil), flipped.Signature...)
	flipped.Signature[17] ^= 0x01
	posing := Staging.Sign(lock, next)
	posing.ClusterID = Prod.ID
	madeUp := Prod.Sign(lock, next)
	madeUp.Token = fence.MaxTokenJSONInt
	madeUp.Signature = make([]byte, ed25519.SignatureSize)
	for i := range madeUp.Signature {
		madeUp.Signature[i] = byte(i * 7)
	}
	return []Forgery{
		{"token number changed under its proof", tampered},
		{"a flipped byte in the proof", flipped},
		{"a proof for another lock", Prod.Sign(lock+"-other", next)},
		{"another cluster's proof", Staging.Sign(lock, next)},
		{"another cluster's key claiming this cluster", posing},
		{"a huge never-issued token without a proof", fence.SignedToken{Token: fence.MaxTokenJSONInt}},
		{"a huge never-issued token with a made-up proof", madeUp},
	}
}
