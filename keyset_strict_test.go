package fence_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

// TestParseKeySetRefusesWhatIsNotOneClustersSet: ParseKeySet accepts a set
// exactly as a cluster publishes it and refuses, with an InvalidError
// naming the field, everything a guard should not silently believe: two
// sets pasted into one document (a second cluster_id or keys member), a
// kid named twice, a key that is not an Ed25519 verification key, a
// public key of the wrong length or in a non-canonical encoding, a
// restored_from naming its own cluster or one twice, and an empty set.
func TestParseKeySetRefusesWhatIsNotOneClustersSet(t *testing.T) {
	k1, k2 := testKey(1), testKey(2)
	x1 := base64.RawURLEncoding.EncodeToString(k1.Public().(ed25519.PublicKey))
	x2 := base64.RawURLEncoding.EncodeToString(k2.Public().(ed25519.PublicKey))
	id1, id2 := fence.KeyIDOf(k1.Public().(ed25519.PublicKey)), fence.KeyIDOf(k2.Public().(ed25519.PublicKey))
	key := func(kid, x, extra string) string {
		return `{"kty":"OKP","crv":"Ed25519"` + extra + `,"kid":"` + kid + `","x":"` + x + `"}`
	}
	good := `{"cluster_id":"c-new","restored_from":["c-old"],"keys":[` + key(id1, x1, `,"alg":"EdDSA","use":"sig"`) + `,` + key(id2, x2, "") + `]}`
	if ks, err := fence.ParseKeySet([]byte(good)); err != nil || len(ks.Keys) != 2 {
		t.Fatalf("a well-formed set: %v", err)
	}
	short := base64.RawURLEncoding.EncodeToString(k1.Public().(ed25519.PublicKey)[:31])
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	// 32 bytes are 43 characters: the last one's two low bits are unused.
	nonCanonical := x1[:42] + string(alphabet[strings.IndexByte(alphabet, x1[42])^1])
	for name, c := range map[string]struct{ doc, field string }{
		"two cluster_id members (two sets pasted together)": {`{"cluster_id":"c-new","keys":[` + key(id1, x1, "") + `],"cluster_id":"c-staging"}`, "key set"},
		"two keys members":                  {`{"cluster_id":"c-new","keys":[` + key(id1, x1, "") + `],"keys":[` + key(id2, x2, "") + `]}`, "key set"},
		"a kid named twice":                 {`{"cluster_id":"c-new","keys":[` + key(id1, x1, "") + `,` + key(id1, x1, "") + `]}`, "key set keys[1].kid"},
		"a member named twice inside a key": {`{"cluster_id":"c-new","keys":[{"kty":"OKP","crv":"Ed25519","kid":"` + id1 + `","x":"` + x2 + `","x":"` + x1 + `"}]}`, "key set"},
		"kty RSA":                           {`{"cluster_id":"c-new","keys":[{"kty":"RSA","crv":"Ed25519","kid":"` + id1 + `","x":"` + x1 + `"}]}`, "key set keys[0]"},
		"crv X25519 (a key-agreement key)":  {`{"cluster_id":"c-new","keys":[{"kty":"OKP","crv":"X25519","kid":"` + id1 + `","x":"` + x1 + `"}]}`, "key set keys[0]"},
		"alg ES256":                         {`{"cluster_id":"c-new","keys":[` + key(id1, x1, `,"alg":"ES256"`) + `]}`, "key set keys[0].alg"},
		"alg none":                          {`{"cluster_id":"c-new","keys":[` + key(id1, x1, `,"alg":"none"`) + `]}`, "key set keys[0].alg"},
		"use enc":                           {`{"cluster_id":"c-new","keys":[` + key(id1, x1, `,"use":"enc"`) + `]}`, "key set keys[0].use"},
		"a key of 31 bytes":                 {`{"cluster_id":"c-new","keys":[` + key(id1, short, "") + `]}`, "key set keys[0].x"},
		"x with padding":                    {`{"cluster_id":"c-new","keys":[` + key(id1, x1+"=", "") + `]}`, "key set keys[0].x"},
		"x not canonical (an unused low bit set)":    {`{"cluster_id":"c-new","keys":[` + key(id1, nonCanonical, "") + `]}`, "key set keys[0].x"},
		"x with a newline":                           {`{"cluster_id":"c-new","keys":[` + key(id1, x1[:20]+`\n`+x1[20:], "") + `]}`, "key set keys[0].x"},
		"no keys":                                    {`{"cluster_id":"c-new","keys":[]}`, "key set keys"},
		"no keys member":                             {`{"cluster_id":"c-new"}`, "key set keys"},
		"restored_from naming the set's own cluster": {`{"cluster_id":"c-new","restored_from":["c-new"],"keys":[` + key(id1, x1, "") + `]}`, "key set restored_from[0]"},
		"restored_from naming a cluster twice":       {`{"cluster_id":"c-new","restored_from":["c-old","c-old"],"keys":[` + key(id1, x1, "") + `]}`, "key set restored_from[1]"},
		"a cluster id with a space":                  {`{"cluster_id":"c new","keys":[` + key(id1, x1, "") + `]}`, "key set cluster_id"},
	} {
		ks, err := fence.ParseKeySet([]byte(c.doc))
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%s: ParseKeySet = %v, %v; want an InvalidError on field %q", name, ks, err, c.field)
		}
	}
}
