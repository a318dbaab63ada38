package fence

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
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

// MaxKeySetRestoredFrom bounds the restored_from ids ParseKeySet accepts.
const MaxKeySetRestoredFrom = 64

// ParseKeySet reads a key set as MarshalJSON writes it, strictly: what a
// guard believes is exactly what one cluster published. Errors are
// *InvalidError naming the field:
//
//   - one cluster: cluster_id a cluster id (1 to MaxClusterIDBytes of A-Z
//     a-z 0-9 '-' '_'); restored_from the ids it was restored from, each
//     once and not its own. A document naming a member twice (two
//     cluster_id or keys members, as two sets pasted into one make) is
//     refused: a JSON decoder would keep the last one and a guard would
//     silently trust another cluster's keys or lose its own. To accept
//     another cluster's proofs, hand the guard that cluster's set (a
//     KeySource can switch between sets); a set is never a union.
//   - at least one key (an empty set verifies nothing: every token would
//     be refused FORGED_TOKEN), at most MaxKeySetKeys;
//   - every key an Ed25519 public key: kty "OKP", crv "Ed25519", alg
//     "EdDSA" or absent, use "sig" or absent; x the canonical unpadded
//     base64url of 32 bytes; kid its KeyIDOf (a kid is derived, so a
//     mislabelled key is an error, not a second name), each kid once.
func ParseKeySet(data []byte) (*KeySet, error) {
	if err := checkNoDuplicateMembers(data); err != nil {
		return nil, err
	}
	var doc jwks
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, Invalid("key set", "a JSON Web Key Set", err.Error())
	}
	if !isBase64URLText(doc.ClusterID) || len(doc.ClusterID) > MaxClusterIDBytes {
		return nil, Invalid("key set cluster_id", fmt.Sprintf("a cluster id (1 to %d ASCII letters, digits, '-' and '_')", MaxClusterIDBytes), strconv.Quote(doc.ClusterID))
	}
	if len(doc.RestoredFrom) > MaxKeySetRestoredFrom {
		return nil, Invalid("key set restored_from", fmt.Sprintf("at most %d cluster ids", MaxKeySetRestoredFrom), strconv.Itoa(len(doc.RestoredFrom)))
	}
	for i, id := range doc.RestoredFrom {
		field := fmt.Sprintf("key set restored_from[%d]", i)
		switch {
		case !isBase64URLText(id) || len(id) > MaxClusterIDBytes:
			return nil, Invalid(field, fmt.Sprintf("a cluster id (1 to %d ASCII letters, digits, '-' and '_')", MaxClusterIDBytes), strconv.Quote(id))
		case id == doc.ClusterID:
			return nil, Invalid(field, "another cluster than cluster_id", strconv.Quote(id))
		case slices.Contains(doc.RestoredFrom[:i], id):
			return nil, Invalid(field, "named once", strconv.Quote(id))
		}
	}
	if len(doc.Keys) == 0 {
		return nil, Invalid("key set keys", "at least one key (an empty key set verifies nothing: every token would be refused; publish the cluster's with `fence keys --json` or GET /v1/keys)", "[]")
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
		if k.Alg != "" && k.Alg != "EdDSA" {
			return nil, Invalid(field+".alg", `"EdDSA" or absent`, strconv.Quote(k.Alg))
		}
		if k.Use != "" && k.Use != "sig" {
			return nil, Invalid(field+".use", `"sig" or absent`, strconv.Quote(k.Use))
		}
		pub, ok := decodeCanonical(k.X, ed25519.PublicKeySize)
		if !ok {
			return nil, Invalid(field+".x", fmt.Sprintf("%d bytes in canonical unpadded base64url", ed25519.PublicKeySize), strconv.Quote(k.X))
		}
		if id := KeyIDOf(pub); k.Kid != id {
			return nil, Invalid(field+".kid", "the key's id "+strconv.Quote(id), strconv.Quote(k.Kid))
		}
		if slices.ContainsFunc(ks.Keys, func(p PublicKey) bool { return p.ID == k.Kid }) {
			return nil, Invalid(field+".kid", "named once", strconv.Quote(k.Kid))
		}
		ks.Keys = append(ks.Keys, PublicKey{ID: k.Kid, Key: pub})
	}
	return ks, nil
}

// checkNoDuplicateMembers refuses a JSON document in which an object names
// a member twice (encoding/json would keep the last).
func checkNoDuplicateMembers(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				name, err := dec.Token()
				if err != nil {
					return err
				}
				n, _ := name.(string)
				if seen[n] {
					return Invalid("key set", "a JSON object naming each member once", strconv.Quote(n)+" twice")
				}
				seen[n] = true
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(); err != nil {
		var inv *InvalidError
		if errors.As(err, &inv) {
			return err
		}
		return Invalid("key set", "a JSON Web Key Set", err.Error())
	}
	return nil
}
