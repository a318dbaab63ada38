package fence_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

func testKey(seed byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	return ed25519.NewKeyFromSeed(s)
}

func keySetOf(cluster string, keys ...ed25519.PrivateKey) *fence.KeySet {
	ks := &fence.KeySet{ClusterID: cluster}
	for _, k := range keys {
		pub := k.Public().(ed25519.PublicKey)
		ks.Keys = append(ks.Keys, fence.PublicKey{ID: fence.KeyIDOf(pub), Key: pub})
	}
	return ks
}

// The proof message is specified byte for byte (docs/design.md): other
// languages build it from the spec, so a change of layout is a break.
func TestProofMessageBytes(t *testing.T) {
	got := hex.EncodeToString(fence.ProofMessage("kid", "c1", "lock/a", 258))
	want := "66656e63652d6772616e742d763100" + // "fence-grant-v1\0"
		"00000003" + "6b6964" + // key id
		"00000002" + "6331" + // cluster id
		"00000006" + "6c6f636b2f61" + // name
		"0000000000000102" // token 258
	if got != want {
		t.Fatalf("ProofMessage:\n got %s\nwant %s", got, want)
	}
}

func TestSignedTokenTextRoundTrip(t *testing.T) {
	st := fence.Sign(testKey(1), "c-1", "orders/7", 42)
	s := st.String()
	if !strings.HasPrefix(s, "42.c-1."+st.KeyID+".") || len(st.Signature) != ed25519.SignatureSize {
		t.Fatalf("text form %q", s)
	}
	back, err := fence.ParseSignedToken(s)
	if err != nil {
		t.Fatal(err)
	}
	if back.String() != s || back.Token != 42 || back.ClusterID != "c-1" || back.KeyID != st.KeyID {
		t.Fatalf("round trip: %+v", back)
	}
	bare, err := fence.ParseSignedToken("42")
	if err != nil || bare.Signed() || bare.Token != 42 || bare.String() != "42" {
		t.Fatalf("bare token: %+v %v", bare, err)
	}
}

func TestParseSignedTokenRefusesMalformed(t *testing.T) {
	sig := strings.Repeat("A", 86)
	for _, s := range []string{
		"", "0", "01", "-1", "9007199254740992", "x", "42.", "42.c", "42.c.k", "42..k." + sig, "42.c..", "42.c.k." + sig[1:],
		"42.c.k." + sig + ".x", "42.c.k.!" + sig[1:], strings.Repeat("1", 300),
	} {
		_, err := fence.ParseSignedToken(s)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != "token" {
			t.Errorf("ParseSignedToken(%q) = %v, want an InvalidError on field token", s, err)
		}
	}
}

func TestKeySetVerify(t *testing.T) {
	k1, k2, other := testKey(1), testKey(2), testKey(3)
	ks := keySetOf("c-new", k1, k2)
	ks.RestoredFrom = []string{"c-old"}
	if err := ks.Verify(fence.Sign(k1, "c-new", "a", 7), "a"); err != nil {
		t.Fatalf("genuine proof refused: %v", err)
	}
	if err := ks.Verify(fence.Sign(k2, "c-old", "a", 7), "a"); err != nil {
		t.Fatalf("proof of the cluster it was restored from refused: %v", err)
	}
	flipped := fence.Sign(k1, "c-new", "a", 7)
	flipped.Signature[10] ^= 1
	bumped := fence.Sign(k1, "c-new", "a", 7)
	bumped.Token = 1<<53 - 1
	for name, c := range map[string]struct {
		st   fence.SignedToken
		lock string
		why  string
	}{
		"unsigned":        {fence.SignedToken{Token: 1<<53 - 1}, "a", "no proof"},
		"flipped byte":    {flipped, "a", "does not hold"},
		"tampered token":  {bumped, "a", "does not hold"},
		"another lock":    {fence.Sign(k1, "c-new", "b", 7), "a", "does not hold"},
		"foreign cluster": {fence.Sign(k1, "c-staging", "a", 7), "a", "another cluster"},
		"unknown key":     {fence.Sign(other, "c-new", "a", 7), "a", "unknown signing key"},
	} {
		err := ks.Verify(c.st, c.lock)
		var f *fence.ForgedTokenError
		if !errors.Is(err, fence.ErrForgedToken) || !errors.As(err, &f) || !strings.Contains(f.Reason, c.why) || f.Token != c.st.Token {
			t.Errorf("%s: Verify = %v, want a ForgedTokenError saying %q", name, err, c.why)
		}
		if fence.ReasonOf(err) != fence.ReasonForgedToken {
			t.Errorf("%s: reason %q", name, fence.ReasonOf(err))
		}
	}
}

func TestKeySetJSONRoundTrip(t *testing.T) {
	ks := keySetOf("c-new", testKey(1), testKey(2))
	ks.RestoredFrom = []string{"c-old"}
	b, err := ks.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := fence.ParseKeySet(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(fence.Sign(testKey(2), "c-old", "x", 3), "x"); err != nil {
		t.Fatalf("parsed set refuses a genuine proof: %v (%s)", err, b)
	}
	// A kid that is not the key's own id is refused, not taken as a name.
	bad := strings.Replace(string(b), ks.Keys[0].ID, "AAAAAAAAAAAA", 1)
	var inv *fence.InvalidError
	if _, err := fence.ParseKeySet([]byte(bad)); !errors.As(err, &inv) || !strings.Contains(inv.Field, "kid") {
		t.Fatalf("mislabelled kid: %v", err)
	}
	if _, err := fence.ParseKeySet([]byte(`{"keys":[]}`)); !errors.As(err, &inv) || !strings.Contains(inv.Field, "cluster_id") {
		t.Fatalf("no cluster id: %v", err)
	}
}
