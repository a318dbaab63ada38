package client

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/fenceworks/fence"
)

// TestLeaseProofIsCompactAndShared: a lease keeps its proof as an inline
// 64-byte signature and a proofKey (cluster and key id) that the Client's
// leases share, and hands back the proof it was given; a signature of
// another length is kept whole, a proof of another token leaves the token
// bare; leases of one owner share its bytes. A session lease of one lock
// with a proof makes no leaseExtra. Seen failing with proofKey making a
// new key every call (each lease its own ids) and with shareOwner
// returning its argument.
func TestLeaseProofIsCompactAndShared(t *testing.T) {
	c, err := New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	proof := func(tok fence.Token, n int) fence.SignedToken {
		// As decoded from a reply: strings and bytes of their own.
		return fence.SignedToken{Token: tok, ClusterID: strings.Clone("cluster-1"), KeyID: strings.Clone("key-1"),
			Signature: bytes.Repeat([]byte{byte(tok)}, n)}
	}
	l1, l2 := &Lease{c: c, token: 1}, &Lease{c: c, token: 2}
	l1.setProof(proof(1, 64))
	l2.setProof(proof(2, 64))
	if l1.pkey == nil || l1.pkey != l2.pkey {
		t.Errorf("two leases of one key keep two proofKeys (%p, %p)", l1.pkey, l2.pkey)
	}
	if l1.leaseExtra != nil {
		t.Error("a 64-byte proof made a leaseExtra")
	}
	for _, l := range []*Lease{l1, l2} {
		if got, want := l.SignedToken(), proof(l.token, 64); !reflect.DeepEqual(got, want) {
			t.Errorf("lease %d: SignedToken = %+v, want %+v", l.token, got, want)
		}
	}
	odd := &Lease{c: c, token: 3}
	odd.setProof(proof(3, 10))
	if got, want := odd.SignedToken(), proof(3, 10); !reflect.DeepEqual(got, want) {
		t.Errorf("a 10-byte signature: SignedToken = %+v, want %+v", got, want)
	}
	other := &Lease{c: c, token: 4}
	other.setProof(proof(5, 64))
	if got := other.SignedToken(); !reflect.DeepEqual(got, fence.SignedToken{Token: 4}) {
		t.Errorf("a proof of another token: SignedToken = %+v, want the bare token", got)
	}
	o1, o2 := c.shareOwner(strings.Clone("worker-7")), c.shareOwner(strings.Clone("worker-7"))
	if o1 != "worker-7" || unsafe.StringData(o1) != unsafe.StringData(o2) {
		t.Errorf("two leases of owner %q keep two copies of it", o1)
	}
}
