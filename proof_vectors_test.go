package fence_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

var updateVectors = flag.Bool("update", false, "rewrite testdata/proof-vectors.json")

// proofVectorsFile holds the cross-language test vectors of signed tokens:
// other languages' verifiers (examples/php-stock, the Python and Node
// snippets of docs/clients.md) are run against it and must give Go's
// verdict on every case.
const proofVectorsFile = "testdata/proof-vectors.json"

// The verdicts of a case: ok, or why a verifier refuses it. The first four
// refusals are KeySet.Verify's reasons (FORGED_TOKEN); malformed is
// ParseSignedToken's (INVALID_ARGUMENT, field token).
const (
	vOK             = "ok"
	vNoProof        = "no proof"
	vAnotherCluster = "another cluster"
	vUnknownKey     = "unknown key"
	vDoesNotHold    = "does not hold"
	vMalformed      = "malformed"
)

type proofVectors struct {
	About  []string          `json:"about"`
	KeySet json.RawMessage   `json:"keySet"`
	Cases  []proofVectorCase `json:"cases"`
}

type proofVectorCase struct {
	Name   string `json:"name"`
	Token  string `json:"token"`  // the text form, as a lease, a header or FENCE_SIGNED_TOKEN carries it
	Lock   string `json:"lock"`   // the lock the verifier expects the token for
	Expect string `json:"expect"` // a verdict: ok, no proof, another cluster, unknown key, does not hold, malformed
	// Message is the hex of the bytes a verifier builds for a token that
	// parses with a proof (ProofMessage of its key id, cluster id, the
	// case's lock and its number): a debugging aid, not an input.
	Message string `json:"message,omitempty"`
}

// vectorKey is a fixed signing key, so that -update writes the same file
// (Ed25519 signatures are deterministic).
func vectorKey(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("fence proof vectors: " + label))
	return ed25519.NewKeyFromSeed(seed[:])
}

// makeProofVectors returns the vectors: the key set of a cluster restored
// from another (two keys: the old cluster's, kept so its proofs still
// verify, and the restored cluster's new signing key), and the cases with
// the verdict each must get.
func makeProofVectors() proofVectors {
	const (
		current  = "7c0e3b52-9a41-4d6e-8f2a-5b1d9c3e7a60" // the restored cluster
		restored = "1f4a8d2c-6b3e-4c71-9d05-e8a2b7f1c394" // the cluster it was restored from
		foreign  = "d2b9e6a1-3c58-4f07-a1e4-6c9b0d8f2e17" // e.g. a staging cluster
		lock     = "stock/sku-42"
	)
	oldKey, newKey, strangerKey := vectorKey("old cluster's key"), vectorKey("restored cluster's key"), vectorKey("a key this set does not hold")
	pub := func(k ed25519.PrivateKey) fence.PublicKey {
		p := k.Public().(ed25519.PublicKey)
		return fence.PublicKey{ID: fence.KeyIDOf(p), Key: p}
	}
	ks := &fence.KeySet{ClusterID: current, RestoredFrom: []string{restored}, Keys: []fence.PublicKey{pub(oldKey), pub(newKey)}}
	ksJSON, err := json.Marshal(ks)
	if err != nil {
		panic(err)
	}

	const maxToken = fence.Token(1<<53 - 1)
	good := fence.Sign(newKey, current, lock, 99)
	b64 := base64.RawURLEncoding.EncodeToString
	withSig := func(st fence.SignedToken, sig string) string {
		return fmt.Sprintf("%d.%s.%s.%s", st.Token, st.ClusterID, st.KeyID, sig)
	}
	flip := func(st fence.SignedToken, i int) string {
		sig := bytes.Clone(st.Signature)
		sig[i] ^= 0x01
		return withSig(st, b64(sig))
	}
	goodSig := b64(good.Signature)
	c := func(name, token, lock, expect string) proofVectorCase {
		return proofVectorCase{Name: name, Token: token, Lock: lock, Expect: expect}
	}
	longLock := "orders/" + strings.Repeat("x", 300)
	cases := []proofVectorCase{
		c("granted by the current cluster, signed with its signing key", good.String(), lock, vOK),
		c("granted by the cluster this one was restored from, signed with its key (an old proof keeps verifying)",
			fence.Sign(oldKey, restored, lock, 98).String(), lock, vOK),
		c("an old key of the set over the current cluster id (keys are not bound to a cluster id)",
			fence.Sign(oldKey, current, lock, 97).String(), lock, vOK),
		c("token 1", fence.Sign(newKey, current, lock, 1).String(), lock, vOK),
		c("the largest token, 2^53-1, granted and signed (all 8 bytes of the token in the message)",
			fence.Sign(newKey, current, lock, maxToken).String(), lock, vOK),
		c("a lock name that is not ASCII: lengths are counted in UTF-8 bytes, not characters",
			fence.Sign(newKey, current, "stock/größe-42", 7).String(), "stock/größe-42", vOK),
		c("a lock name of 307 bytes (more than one length byte)", fence.Sign(newKey, current, longLock, 8).String(), longLock, vOK),

		c("a bare 2^53-1 (a made-up token: no proof)", "9007199254740991", lock, vNoProof),
		c("a bare token that was granted (unsigned)", "99", lock, vNoProof),

		c("the first byte of the signature flipped", flip(good, 0), lock, vDoesNotHold),
		c("the last byte of the signature flipped", flip(good, 63), lock, vDoesNotHold),
		c("the token number changed (99 to 100), proof of 99", withSig(fence.SignedToken{Token: 100, ClusterID: current, KeyID: good.KeyID}, goodSig), lock, vDoesNotHold),
		c("2^53-1 with another token's proof", withSig(fence.SignedToken{Token: maxToken, ClusterID: current, KeyID: good.KeyID}, goodSig), lock, vDoesNotHold),
		c("another lock's proof (granted for stock/sku-41)", fence.Sign(newKey, current, "stock/sku-41", 99).String(), lock, vDoesNotHold),
		c("the right proof checked for another lock", good.String(), "stock/sku-41", vDoesNotHold),
		c("a lock name that differs only in case", good.String(), "Stock/sku-42", vDoesNotHold),
		c("signed by the new key, labelled with the old key's id", withSig(fence.SignedToken{Token: 99, ClusterID: current, KeyID: pub(oldKey).ID}, goodSig), lock, vDoesNotHold),
		c("signed for the current cluster, labelled with the restored-from cluster id", withSig(fence.SignedToken{Token: 99, ClusterID: restored, KeyID: good.KeyID}, goodSig), lock, vDoesNotHold),
		c("a made-up signature (all zero bytes) under a known key", withSig(good, b64(make([]byte, 64))), lock, vDoesNotHold),

		c("another cluster's proof (a staging cluster with its own key)", fence.Sign(strangerKey, foreign, lock, 99).String(), lock, vAnotherCluster),
		c("another cluster id with a key this set holds (the cluster is checked first)", fence.Sign(newKey, foreign, lock, 99).String(), lock, vAnotherCluster),
		c("a cluster id that differs only in case", withSig(fence.SignedToken{Token: 99, ClusterID: strings.ToUpper(current), KeyID: good.KeyID}, goodSig), lock, vAnotherCluster),

		c("the current cluster id with a key the set does not hold", fence.Sign(strangerKey, current, lock, 99).String(), lock, vUnknownKey),
		c("a made-up key id", withSig(fence.SignedToken{Token: 99, ClusterID: current, KeyID: "AAAAAAAAAAAA"}, goodSig), lock, vUnknownKey),

		c("a bare 2^53 (above the largest token)", "9007199254740992", lock, vMalformed),
		c("token 0", "0", lock, vMalformed),
		c("empty", "", lock, vMalformed),
		c("a leading zero", "099."+strings.TrimPrefix(good.String(), "99."), lock, vMalformed),
		c("a plus sign", "+99."+strings.TrimPrefix(good.String(), "99."), lock, vMalformed),
		c("a space before the number", " 99", lock, vMalformed),
		c("an underscore in the number (Python's int() would take 9_9)", "9_9."+strings.TrimPrefix(good.String(), "99."), lock, vMalformed),
		c("digits that are not ASCII (Arabic-Indic 99)", "٩٩."+strings.TrimPrefix(good.String(), "99."), lock, vMalformed),
		c("the signature in standard base64 ('+' for '-', '/' for '_')", withSig(good, strings.NewReplacer("-", "+", "_", "/").Replace(goodSig)), lock, vMalformed),
		c("the signature with base64 padding", withSig(good, goodSig+"=="), lock, vMalformed),
		c("the signature one character short", withSig(good, goodSig[:85]), lock, vMalformed),
		c("the signature with a character that is not base64url", withSig(good, goodSig[:40]+"!"+goodSig[41:]), lock, vMalformed),
		c("the signature with a character added", withSig(good, goodSig+"A"), lock, vMalformed),
		c("an empty cluster id", fmt.Sprintf("99..%s.%s", good.KeyID, goodSig), lock, vMalformed),
		c("an empty key id", fmt.Sprintf("99.%s..%s", current, goodSig), lock, vMalformed),
		c("a fifth part", good.String()+".x", lock, vMalformed),
		c("three parts", fmt.Sprintf("99.%s.%s", current, good.KeyID), lock, vMalformed),
		c("a trailing dot", "99.", lock, vMalformed),
		// The parser is strict (F7): one value, one reading, in every language.
		c("the signature's last character with an unused low bit set (decodes to the same bytes: not canonical)", withSig(good, nonCanonicalTail(goodSig)), lock, vMalformed),
		c("a newline at the end (Go's base64 decoder would skip it)", good.String()+"\n", lock, vMalformed),
		c("a CRLF inside the signature", withSig(good, goodSig[:40]+"\r\n"+goodSig[40:]), lock, vMalformed),
		c("a space after the token", good.String()+" ", lock, vMalformed),
		c("a space before a signed token", " "+good.String(), lock, vMalformed),
		c("a tab inside the cluster id", withSig(fence.SignedToken{Token: 99, ClusterID: current[:8] + "\t" + current[8:], KeyID: good.KeyID}, goodSig), lock, vMalformed),
		c("a space inside the cluster id", withSig(fence.SignedToken{Token: 99, ClusterID: "7c0e3b52 9a41", KeyID: good.KeyID}, goodSig), lock, vMalformed),
		c("a cluster id with a character outside A-Z a-z 0-9 - _", withSig(fence.SignedToken{Token: 99, ClusterID: current + "/x", KeyID: good.KeyID}, goodSig), lock, vMalformed),
		c("a cluster id of 65 characters", withSig(fence.SignedToken{Token: 99, ClusterID: strings.Repeat("c", 65), KeyID: good.KeyID}, goodSig), lock, vMalformed),
		c("a key id of 11 characters", withSig(fence.SignedToken{Token: 99, ClusterID: current, KeyID: good.KeyID[:11]}, goodSig), lock, vMalformed),
		c("a key id of 13 characters", withSig(fence.SignedToken{Token: 99, ClusterID: current, KeyID: good.KeyID + "A"}, goodSig), lock, vMalformed),
		c("a key id with padding", withSig(fence.SignedToken{Token: 99, ClusterID: current, KeyID: good.KeyID[:11] + "="}, goodSig), lock, vMalformed),
		c("a bare token with a newline", "99\n", lock, vMalformed),
		c("a bare token with a plus sign", "+99", lock, vMalformed),
		c("a bare token with a minus sign", "-1", lock, vMalformed),
		c("a bare token with a leading zero", "0099", lock, vMalformed),
		c("a bare token of 17 digits", "10000000000000000", lock, vMalformed),
		c("the signature with one padding character", withSig(good, goodSig+"="), lock, vMalformed),
		c("more than 256 bytes (a long cluster id, otherwise well signed)", fence.Sign(newKey, strings.Repeat("c", 160), lock, 99).String(), lock, vMalformed),
	}
	for i, cs := range cases {
		if st, err := fence.ParseSignedToken(cs.Token); err == nil && st.Signed() {
			cases[i].Message = hex.EncodeToString(fence.ProofMessage(st.KeyID, st.ClusterID, cs.Lock, st.Token))
		}
	}
	return proofVectors{
		About: []string{
			"Test vectors of Fence's signed tokens (issue 22): every verifier, in any language, must give each case the verdict in expect.",
			"keySet is what `fence keys --json` and GET /v1/keys publish: a cluster restored from another (restored_from), with two keys.",
			"token is a signed token's text form <token>.<cluster id>.<key id>.<signature, unpadded base64url> or a bare decimal token;",
			"lock is the lock the verifier checks it for; message is the hex of the bytes a verifier builds (docs/design.md), when the token parses with a proof.",
			"expect: ok, or no proof / another cluster / unknown key / does not hold (FORGED_TOKEN, KeySet.Verify's reasons), or malformed (ParseSignedToken refuses it).",
			"Written by `go test -run TestProofVectors -update .` (proof_vectors_test.go), which checks Go's ParseSignedToken and KeySet.Verify against every case.",
		},
		KeySet: ksJSON,
		Cases:  cases,
	}
}

// nonCanonicalTail returns sig, the unpadded base64url of 64 bytes, with
// its last character's unused low bit flipped: a lenient decoder reads the
// same 64 bytes from it.
func nonCanonicalTail(sig string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	return sig[:len(sig)-1] + string(alphabet[last^1])
}

// goVerdict is what Go's ParseSignedToken and KeySet.Verify say of token
// checked for lock.
func goVerdict(ks *fence.KeySet, token, lock string) (string, error) {
	st, err := fence.ParseSignedToken(token)
	if err != nil {
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != "token" {
			return "", fmt.Errorf("ParseSignedToken(%q): %v, want an InvalidError on field token", token, err)
		}
		return vMalformed, nil
	}
	err = ks.Verify(st, lock)
	if err == nil {
		return vOK, nil
	}
	var forged *fence.ForgedTokenError
	if !errors.As(err, &forged) || !errors.Is(err, fence.ErrForgedToken) || forged.Token != st.Token || forged.Name != lock {
		return "", fmt.Errorf("Verify(%q, %q): %v, want a ForgedTokenError of token %d and lock %q", token, lock, err, st.Token, lock)
	}
	for prefix, v := range map[string]string{
		"no proof": vNoProof, "proof of another cluster": vAnotherCluster, "unknown signing key": vUnknownKey,
		"proof does not hold": vDoesNotHold,
	} {
		if strings.HasPrefix(forged.Reason, prefix) {
			return v, nil
		}
	}
	return "", fmt.Errorf("Verify(%q, %q): reason %q is none of the known ones", token, lock, forged.Reason)
}

// TestProofVectors: the committed vectors are the ones this test makes
// (run with -update after a change), the key set parses, and Go's
// ParseSignedToken and KeySet.Verify give every case its expected verdict.
func TestProofVectors(t *testing.T) {
	want := makeProofVectors()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	path := filepath.FromSlash(proofVectorsFile)
	if *updateVectors {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with go test -run TestProofVectors -update .)", err)
	}
	if !bytes.Equal(committed, data) {
		// Not fatal: the verdicts below say which case a changed parser reads otherwise.
		t.Errorf("%s is not what makeProofVectors makes: run go test -run TestProofVectors -update . and commit it", proofVectorsFile)
	}
	var v proofVectors
	if err := json.Unmarshal(committed, &v); err != nil {
		t.Fatal(err)
	}
	ks, err := fence.ParseKeySet(v.KeySet)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks.Keys) != 2 || len(ks.RestoredFrom) != 1 {
		t.Fatalf("the vectors' key set: %d keys, restored from %v; want 2 keys and one cluster", len(ks.Keys), ks.RestoredFrom)
	}
	seen := map[string]int{}
	for _, cs := range v.Cases {
		got, err := goVerdict(ks, cs.Token, cs.Lock)
		if err != nil {
			t.Errorf("%s: %v", cs.Name, err)
			continue
		}
		if got != cs.Expect {
			t.Errorf("%s: Go says %q, the vector expects %q (token %q, lock %q)", cs.Name, got, cs.Expect, cs.Token, cs.Lock)
		}
		seen[cs.Expect]++
	}
	for _, verdict := range []string{vOK, vNoProof, vAnotherCluster, vUnknownKey, vDoesNotHold, vMalformed} {
		if seen[verdict] == 0 {
			t.Errorf("no case expects %q", verdict)
		}
	}
}
