package fence

import (
	"crypto/ed25519"
	"strings"
	"testing"
)

// A proof is a bearer credential: a refusal (which the server logs) shows
// its token, cluster and key id, never its signature.
func TestRefusalsNeverShowAProof(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	st := Sign(key, "c1", "x", 7)
	sig := st.String()[strings.LastIndex(st.String(), ".")+1:]
	if got := st.Redacted(); strings.Contains(got, sig) || !strings.HasPrefix(got, "7.c1."+st.KeyID) {
		t.Fatalf("Redacted() = %q", got)
	}
	err := (WriteRequest{Resource: "x", Token: 8, Signed: st, Value: []byte("v")}).Validate(Limits{})
	if err == nil || strings.Contains(err.Error(), sig) {
		t.Fatalf("a write whose signed token is another token's: %v (must refuse without the signature)", err)
	}
}
