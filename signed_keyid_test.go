package fence_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/fenceworks/fence"
)

// TestSignNamesEachKeyByItsOwnID: Sign remembers the id of the key it
// signed with last (signingKeyID); signing with keys in turn (a rotation,
// two keys live at once), each proof names its own key's id and verifies
// with that key.
func TestSignNamesEachKeyByItsOwnID(t *testing.T) {
	keys := []ed25519.PrivateKey{testKey(1), testKey(2), testKey(3)}
	for round := range 3 {
		for i, k := range keys {
			st := fence.Sign(k, "cluster-1", "lock/a", fence.Token(10*round+i+1))
			pub := k.Public().(ed25519.PublicKey)
			if want := fence.KeyIDOf(pub); st.KeyID != want {
				t.Fatalf("round %d key %d: key id %q, want %q", round, i, st.KeyID, want)
			}
			msg := fence.ProofMessage(st.KeyID, "cluster-1", "lock/a", st.Token)
			if !ed25519.Verify(pub, msg, st.Signature) {
				t.Fatalf("round %d key %d: the proof does not verify with its key", round, i)
			}
		}
	}
}
