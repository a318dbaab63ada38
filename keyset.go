package fence

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// KeySet is what a guard needs to tell a granted token from a forged one:
// the public signing keys of a cluster and the cluster ids whose proofs it
// accepts — the cluster's own and those it was restored from (a restore
// makes a new cluster id, and keeps the keys that signed the old one's
// grants). It is published by `fence keys --json` and GET /v1/keys as a
// JSON Web Key Set (RFC 7517 with RFC 8037's OKP keys) with two more
// members:
//
//	{"cluster_id": "<id>", "restored_from": ["<older id>", ...],
//	 "keys": [{"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
//	           "kid": "<key id>", "x": "<public key, unpadded base64url>"}]}
//
// A KeySet is read-only once made; it is safe for concurrent use.
type KeySet struct {
	ClusterID    string
	RestoredFrom []string // older cluster ids, newest first
	Keys         []PublicKey
}

// PublicKey is one public signing key of a KeySet.
type PublicKey struct {
	ID  string // KeyIDOf(Key)
	Key ed25519.PublicKey
}

// Verify checks that st is a grant of lock name made by the set's cluster
// (or one it was restored from) and signed by one of its keys. It returns
// nil or a *ForgedTokenError saying why not: no proof, a foreign cluster,
// an unknown key, or a signature that does not hold for this lock and
// token (tampered, or made for another lock). It checks the proof only;
// whether the token is the newest is the guard's compare.
func (ks *KeySet) Verify(st SignedToken, name string) error {
	forged := func(why string) error { return &ForgedTokenError{Token: st.Token, Name: name, Reason: why} }
	if !st.Signed() {
		return forged("no proof")
	}
	if st.ClusterID != ks.ClusterID && !slices.Contains(ks.RestoredFrom, st.ClusterID) {
		return forged("proof of another cluster (" + strconv.Quote(st.ClusterID) + ")")
	}
	for _, k := range ks.Keys {
		if k.ID != st.KeyID {
			continue
		}
		if !ed25519.Verify(k.Key, ProofMessage(st.KeyID, st.ClusterID, name, st.Token), st.Signature) {
			return forged("proof does not hold for this lock and token")
		}
		return nil
	}
	return forged("unknown signing key " + strconv.Quote(st.KeyID))
}

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
	Kid string `json:"kid"`
	X   string `json:"x"`
}

type jwks struct {
	ClusterID    string   `json:"cluster_id"`
	RestoredFrom []string `json:"restored_from,omitempty"`
	Keys         []jwk    `json:"keys"`
}

// MarshalJSON writes the set as a JSON Web Key Set (see KeySet).
func (ks *KeySet) MarshalJSON() ([]byte, error) {
	doc := jwks{ClusterID: ks.ClusterID, RestoredFrom: ks.RestoredFrom, Keys: make([]jwk, 0, len(ks.Keys))}
	for _, k := range ks.Keys {
		doc.Keys = append(doc.Keys, jwk{Kty: "OKP", Crv: "Ed25519", Alg: "EdDSA", Use: "sig", Kid: k.ID, X: base64.RawURLEncoding.EncodeToString(k.Key)})
	}
	return json.Marshal(doc)
}

// MaxKeySetKeys bounds the keys of a KeySet ParseKeySet accepts.
const MaxKeySetKeys = 1024

// ParseKeySet reads a key set as MarshalJSON writes it. Every key must be
// an Ed25519 key whose kid is its KeyIDOf (a kid is derived, so a
// mislabelled key is an error, not a second name); a cluster id is
// required. Errors are *InvalidError naming the field.
func ParseKeySet(data []byte) (*KeySet, error) {
	var doc jwks
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, Invalid("key set", "a JSON Web Key Set", err.Error())
	}
	if doc.ClusterID == "" {
		return nil, Invalid("key set cluster_id", "a cluster id", `""`)
	}
	if len(doc.Keys) > MaxKeySetKeys {
		return nil, Invalid("key set keys", fmt.Sprintf("at most %d", MaxKeySetKeys), strconv.Itoa(len(doc.Keys)))
	}
	ks := &KeySet{ClusterID: doc.ClusterID, RestoredFrom: doc.RestoredFrom}
	for i, k := range doc.Keys {
		field := fmt.Sprintf("key set keys[%d]", i)
		if k.Kty != "OKP" || k.Crv != "Ed25519" {
			return nil, Invalid(field, `kty "OKP", crv "Ed25519"`, strconv.Quote(k.Kty)+" "+strconv.Quote(k.Crv))
		}
		pub, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, Invalid(field+".x", fmt.Sprintf("%d bytes in unpadded base64url", ed25519.PublicKeySize), strconv.Quote(k.X))
		}
		if id := KeyIDOf(pub); k.Kid != id {
			return nil, Invalid(field+".kid", "the key's id "+strconv.Quote(id), strconv.Quote(k.Kid))
		}
		ks.Keys = append(ks.Keys, PublicKey{ID: k.Kid, Key: pub})
	}
	return ks, nil
}
