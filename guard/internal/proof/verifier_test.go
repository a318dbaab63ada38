package proof

import (
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/fenceworks/fence"
)

func testKeys() (ed25519.PrivateKey, *fence.KeySet) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)
	return key, &fence.KeySet{ClusterID: "c", Keys: []fence.PublicKey{{ID: fence.KeyIDOf(pub), Key: pub}}}
}

func TestVerifier(t *testing.T) {
	key, ks := testKeys()
	good := fence.Sign(key, "c", "lock", 5)
	bare := fence.SignedToken{Token: 5}
	mapped := func(string) string { return "lock" }
	forged := func(err error) bool { return errors.Is(err, fence.ErrForgedToken) }
	for _, c := range []struct {
		name string
		v    *Verifier
		res  string
		st   fence.SignedToken
		ok   bool
	}{
		{"nil verifier checks nothing", nil, "x", bare, true},
		{"zero config checks nothing", &Verifier{}, "x", bare, true},
		{"good proof, resource = lock", &Verifier{Config{KeySet: ks}}, "lock", good, true},
		{"good proof, other resource", &Verifier{Config{KeySet: ks}}, "other", good, false},
		{"good proof, mapped resource", &Verifier{Config{KeySet: ks, LockFor: mapped}}, "other", good, true},
		{"no proof", &Verifier{Config{KeySet: ks}}, "lock", bare, false},
		{"no proof, AllowUnsigned", &Verifier{Config{KeySet: ks, AllowUnsigned: true}}, "lock", bare, true},
		{"bad proof, AllowUnsigned", &Verifier{Config{KeySet: ks, AllowUnsigned: true}}, "other", good, false},
		{"source", &Verifier{Config{KeySource: func() *fence.KeySet { return ks }}}, "lock", good, true},
		{"lock mapped to nothing", &Verifier{Config{KeySet: ks, LockFor: func(string) string { return "" }}}, "lock", good, false},
	} {
		err := c.v.Verify(c.res, c.st)
		if c.ok != (err == nil) || (!c.ok && !forged(err)) {
			t.Errorf("%s: Verify = %v, want ok=%v (else FORGED_TOKEN)", c.name, err, c.ok)
		}
	}
	var fe *fence.ForgedTokenError
	v := &Verifier{Config{KeySet: ks, LockFor: func(string) string { return "" }}}
	if err := v.Verify("lock", good); !errors.As(err, &fe) || fe.Reason != `no lock protects resource "lock"` {
		t.Errorf("a resource no lock protects: %v, want the reason saying so", err)
	}
	v = &Verifier{Config{KeySource: func() *fence.KeySet { return nil }}}
	if err := v.Verify("lock", good); !errors.Is(err, ErrNoKeySet) {
		t.Errorf("a nil key set: %v, want ErrNoKeySet", err)
	}
	if _, err := New(Config{KeySet: ks, KeySource: func() *fence.KeySet { return ks }}); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("KeySet and KeySource: %v, want INVALID_ARGUMENT", err)
	}
}
