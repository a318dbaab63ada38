package fence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// A signed token is a fencing token with the proof of its grant: an
// Ed25519 signature, by one of the cluster's signing keys, over the
// canonical bytes of (key id, cluster id, lock name, token) — ProofMessage,
// specified byte for byte in docs/design.md so that any language can check
// it. A guard that holds the cluster's public keys (a KeySet) tells a
// token Fence granted for this lock from a forged, tampered, foreign or
// mis-scoped one before it compares the number (G9).
//
// Its text form, the one value a lease hands out for guards (the
// Fence-Token header, FENCE_SIGNED_TOKEN of `fence run`, signedToken in
// the JSON API), is
//
//	<token>.<cluster id>.<key id>.<signature>
//
// with the token in decimal, the signature in unpadded base64url (86
// characters). The token comes first, so a reader that wants only the
// number stops at the first '.'. A bare decimal token is a SignedToken
// without a proof.

// SignedToken is a fencing token and the proof of its grant. A zero
// Signature means no proof (an unsigned token).
type SignedToken struct {
	Token     Token
	ClusterID string // the cluster that granted it
	KeyID     string // the signing key (KeyIDOf its public key)
	Signature []byte // ed25519.SignatureSize bytes, over ProofMessage
}

// Signed reports whether t carries a proof.
func (t SignedToken) Signed() bool { return len(t.Signature) != 0 }

// String returns the text form: "<token>.<cluster id>.<key id>.<signature>",
// or the bare token when t carries no proof.
func (t SignedToken) String() string {
	if !t.Signed() {
		return t.Token.String()
	}
	return t.Token.String() + "." + t.ClusterID + "." + t.KeyID + "." + base64.RawURLEncoding.EncodeToString(t.Signature)
}

// Redacted is t's text form without its signature ("<token>.<cluster
// id>.<key id>.…"): what an error or a log line may show of a proof, which
// is a bearer credential at every guard.
func (t SignedToken) Redacted() string {
	if !t.Signed() {
		return t.Token.String()
	}
	return t.Token.String() + "." + t.ClusterID + "." + t.KeyID + ".…"
}

// MaxSignedTokenBytes bounds the text form ParseSignedToken accepts.
const MaxSignedTokenBytes = 256

// MaxClusterIDBytes bounds a cluster id: 1 to 64 ASCII letters, digits,
// '-' and '_' (a node's is a UUID).
const MaxClusterIDBytes = 64

// KeyIDChars is the length of a key id (KeyIDOf: 9 bytes in unpadded
// base64url).
const KeyIDChars = 12

// ParseSignedToken reads the text form of a signed token, or a bare
// decimal token (then the result carries no proof). It is strict, so that
// every verifier, in any language, reads one value one way: the number is
// ASCII digits with no sign and no leading zero, in [1, 2^53-1]; the
// cluster id 1 to MaxClusterIDBytes of A-Z a-z 0-9 '-' '_'; the key id
// KeyIDChars of the base64url alphabet; the signature exactly the
// canonical unpadded base64url of 64 bytes (86 characters, the unused low
// bits of the last one zero: decoding and encoding again gives the same
// text). Nothing else: no padding, no '+' or '/', no whitespace anywhere
// (a space, tab, \r or \n, around or inside), at most MaxSignedTokenBytes
// in all. A malformed value is a *InvalidError naming field "token";
// ParseSignedToken checks the form, not the proof (KeySet.Verify does).
func ParseSignedToken(s string) (SignedToken, error) {
	if len(s) > MaxSignedTokenBytes {
		return SignedToken{}, Invalid("token", fmt.Sprintf("at most %d bytes", MaxSignedTokenBytes), fmt.Sprintf("%d bytes", len(s)))
	}
	num, rest, signed := strings.Cut(s, ".")
	tok, err := parseTokenNumber(num)
	if err != nil {
		return SignedToken{}, err
	}
	if !signed {
		return SignedToken{Token: tok}, nil
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		// Not the text: it may be a real proof with a dot too many (a
		// bearer credential, and errors are logged).
		return SignedToken{}, Invalid("token", "<token>.<cluster id>.<key id>.<signature>", fmt.Sprintf("%d parts", len(parts)+1))
	}
	if !isBase64URLText(parts[0]) || len(parts[0]) > MaxClusterIDBytes {
		return SignedToken{}, Invalid("token", fmt.Sprintf("a cluster id of 1 to %d ASCII letters, digits, '-' and '_'", MaxClusterIDBytes), strconv.Quote(parts[0]))
	}
	if !isBase64URLText(parts[1]) || len(parts[1]) != KeyIDChars {
		return SignedToken{}, Invalid("token", fmt.Sprintf("a key id of %d base64url characters", KeyIDChars), strconv.Quote(parts[1]))
	}
	sig, ok := decodeCanonical(parts[2], ed25519.SignatureSize)
	if !ok {
		return SignedToken{}, Invalid("token", fmt.Sprintf("a signature of %d bytes in canonical unpadded base64url", ed25519.SignatureSize), fmt.Sprintf("%d characters", len(parts[2])))
	}
	return SignedToken{Token: tok, ClusterID: parts[0], KeyID: parts[1], Signature: sig}, nil
}

// isBase64URLText reports whether s is not empty and only of the
// base64url alphabet A-Z a-z 0-9 '-' '_' (so no whitespace, padding, '+'
// or '/').
func isBase64URLText(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// decodeCanonical decodes s, the unpadded base64url of n bytes, only when
// it is the one text that encodes them: Go's decoder skips \r and \n and
// ignores the unused low bits of the last character, so the bytes are
// encoded again and compared.
func decodeCanonical(s string, n int) ([]byte, bool) {
	if !isBase64URLText(s) || len(s) != base64.RawURLEncoding.EncodedLen(n) {
		return nil, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != n || base64.RawURLEncoding.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

// parseTokenNumber reads a decimal token in [1, MaxToken]: ASCII digits,
// no sign, no leading zero.
func parseTokenNumber(s string) (Token, error) {
	bad := func() (Token, error) {
		return 0, Invalid("token", fmt.Sprintf("a decimal number in [1, %d]", uint64(MaxTokenJSONInt)), strconv.Quote(s))
	}
	if s == "" || len(s) > 16 || s[0] == '0' {
		return bad()
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return bad()
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n > uint64(MaxTokenJSONInt) {
		return bad()
	}
	return Token(n), nil
}

// proofDomain starts every proof message, so that a Fence signing key's
// signature over one can never be taken for a signature over anything
// else.
const proofDomain = "fence-grant-v1\x00"

// ProofMessage returns the bytes a grant's proof signs:
//
//	"fence-grant-v1" 0x00
//	uint32 big-endian length of key id,     key id bytes
//	uint32 big-endian length of cluster id, cluster id bytes
//	uint32 big-endian length of lock name,  lock name bytes
//	uint64 big-endian token
func ProofMessage(keyID, clusterID, name string, token Token) []byte {
	b := make([]byte, 0, len(proofDomain)+12+len(keyID)+len(clusterID)+len(name)+8)
	b = append(b, proofDomain...)
	for _, f := range [...]string{keyID, clusterID, name} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return binary.BigEndian.AppendUint64(b, uint64(token))
}

// KeyIDOf returns a public key's id: the unpadded base64url of the first
// 9 bytes of its SHA-256 (12 characters). Ids are derived, not chosen, so
// two clusters' keys never share one by accident.
func KeyIDOf(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(h[:9])
}

// Sign returns the proof of granting token on lock name in cluster
// clusterID, made with key. Ed25519 is deterministic: every replica, replay
// and restore that signs the same grant with the same key makes the same
// bytes.
func Sign(key ed25519.PrivateKey, clusterID, name string, token Token) SignedToken {
	id := signingKeyID(key)
	return SignedToken{Token: token, ClusterID: clusterID, KeyID: id,
		Signature: ed25519.Sign(key, ProofMessage(id, clusterID, name, token))}
}

// lastKeyID is the public key Sign signed with last and its id: a node
// signs every grant with the same key, and the id is a SHA-256 of it
// (KeyIDOf), so the id is not hashed again for every grant.
var lastKeyID atomic.Pointer[keyIDEntry]

type keyIDEntry struct {
	pub [ed25519.PublicKeySize]byte
	id  string
}

// signingKeyID is KeyIDOf(key's public half), from lastKeyID when it holds
// the same public key (compared whole: the id is a function of it alone).
func signingKeyID(key ed25519.PrivateKey) string {
	if len(key) != ed25519.PrivateKeySize {
		return KeyIDOf(key.Public().(ed25519.PublicKey)) // ed25519.Sign refuses it
	}
	pub := key[ed25519.SeedSize:]
	if e := lastKeyID.Load(); e != nil && bytes.Equal(e.pub[:], pub) {
		return e.id
	}
	e := &keyIDEntry{id: KeyIDOf(ed25519.PublicKey(pub))}
	copy(e.pub[:], pub)
	lastKeyID.Store(e)
	return e.id
}
