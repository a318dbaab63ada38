package state

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// seed is a distinct, fixed key seed for tests.
func seed(n byte) []byte { return bytes.Repeat([]byte{n}, ed25519.SeedSize) }

func keyIDOfSeed(n byte) string {
	return fence.KeyIDOf(ed25519.NewKeyFromSeed(seed(n)).Public().(ed25519.PublicKey))
}

func rotate(now int64, n byte) Command {
	return Command{Op: OpKeyRotate, Now: now, Value: seed(n), Admin: true}
}

func retire(now int64, id string) Command {
	return Command{Op: OpKeyRetire, Now: now, Name: id, Admin: true}
}

// retireNow is `fence keys retire ID --now`.
func retireNow(now int64, id string) Command {
	return Command{Op: OpKeyRetire, Now: now, Name: id, Delta: 1, Admin: true}
}

// keyStates renders the keys as "id:status:leases" in order.
func keyStates(m *Machine) string {
	var parts []string
	for _, k := range m.SigningKeys() {
		parts = append(parts, fmt.Sprintf("%s:%s:%d", k.ID, k.Status, k.Leases))
	}
	return strings.Join(parts, " ")
}

// signerID is the id of the key LeaseSigner returns for name and token.
func signerID(t *testing.T, m *Machine, name string, tok fence.Token) string {
	t.Helper()
	k, cid, ok := m.LeaseSigner(name, tok)
	if !ok {
		return ""
	}
	if cid != m.ClusterID() {
		t.Fatalf("LeaseSigner cluster id %q, want %q", cid, m.ClusterID())
	}
	return fence.KeyIDOf(k.Public().(ed25519.PublicKey))
}

func keyedMachine(t *testing.T) *Machine {
	m := New()
	mustOK(t, m, Command{Op: OpConfig, Now: sec, Config: DefaultConfig(), ClusterID: "c1"})
	return m
}

// A rotation makes the new key the signing key and the one before it
// verify-only; the start-up variant adds a key only to a state without
// one; a seed must be 32 bytes and new; a non-admin may not rotate once
// auth is bootstrapped (the start-up variant needs no admin).
func TestKeyRotateRules(t *testing.T) {
	m := keyedMachine(t)
	if m.HasSigningKey() {
		t.Fatal("a new machine has a signing key")
	}
	first := Command{Op: OpKeyRotate, Now: sec, Value: seed(1), Delta: 1}
	if r := mustOK(t, m, first); r.KeyID != keyIDOfSeed(1) {
		t.Fatalf("start-up rotate: KeyID %q, want %q", r.KeyID, keyIDOfSeed(1))
	}
	// A second leader's start-up proposal: a no-op.
	if r := mustOK(t, m, Command{Op: OpKeyRotate, Now: sec, Value: seed(2), Delta: 1}); r.KeyID != "" {
		t.Fatalf("start-up rotate on a keyed state added %q", r.KeyID)
	}
	if got, want := keyStates(m), keyIDOfSeed(1)+":active:0"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
	mustOK(t, m, rotate(sec, 2))
	if got, want := keyStates(m), keyIDOfSeed(1)+":verify-only:0 "+keyIDOfSeed(2)+":active:0"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
	inv := errAs[*fence.InvalidError](t, m.Apply(Command{Op: OpKeyRotate, Now: sec, Value: seed(3)[:31], Admin: true}).Err)
	if inv.Field != "value" {
		t.Fatalf("short seed refused on %q", inv.Field)
	}
	if inv := errAs[*fence.InvalidError](t, m.Apply(rotate(sec, 1)).Err); inv.Field != "value" {
		t.Fatalf("a used seed refused on %q", inv.Field)
	}
	mustOK(t, m, Command{Op: OpAuthBootstrap, Now: sec, Name: "root", Value: hashOf("s0")})
	errAs[*fence.PermissionDeniedError](t, m.Apply(Command{Op: OpKeyRotate, Now: sec, Value: seed(4), Principal: "token:x"}).Err)
	errAs[*fence.PermissionDeniedError](t, m.Apply(Command{Op: OpKeyRetire, Now: sec, Name: keyIDOfSeed(1), Principal: "token:x"}).Err)
	mustOK(t, m, Command{Op: OpKeyRotate, Now: sec, Value: seed(4), Delta: 1}) // no-op, no admin needed
	if n := len(m.SigningKeys()); n != 2 {
		t.Fatalf("%d keys after refused rotations, want 2", n)
	}
	for i := len(m.SigningKeys()); i < MaxSigningKeys; i++ {
		mustOK(t, m, rotate(sec, byte(10+i)))
	}
	errAs[*fence.ResourceExhaustedError](t, m.Apply(rotate(sec, 200)).Err)
}

// G9: every lease records the key that was the signing key at its grant
// and keeps it for its whole life (a renew does not move it). A retire is
// refused for the
// signing key and for an unknown id; a retired key stays (and is
// published) while a live lease is signed by it, and is dropped when the
// last one ends.
func TestKeyRetireRules(t *testing.T) {
	m := keyedMachine(t)
	mustGrant(t, m, acq(sec, "before", "A", time.Minute), 1)
	if id := signerID(t, m, "before", 1); id != "" {
		t.Fatalf("a grant before any key is signed by %q", id)
	}
	mustOK(t, m, rotate(sec, 1))
	k1, k2 := keyIDOfSeed(1), keyIDOfSeed(2)
	mustGrant(t, m, acq(sec, "a", "A", time.Minute), 2)
	mustGrant(t, m, acq(sec, "b", "B", time.Minute), 3)
	mustOK(t, m, rotate(2*sec, 2))
	mustGrant(t, m, acq(2*sec, "c", "C", time.Minute), 4)
	for name, want := range map[string]string{"a": k1, "b": k1, "c": k2} {
		tok := m.Lock(name, m.Now()).Lease.Token
		if got := signerID(t, m, name, tok); got != want {
			t.Fatalf("lease %s signed by %q, want %q", name, got, want)
		}
	}
	if got, want := keyStates(m), k1+":verify-only:2 "+k2+":active:1"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
	inv := errAs[*fence.InvalidError](t, m.Apply(retire(2*sec, k2)).Err)
	if inv.Field != "key_id" {
		t.Fatalf("retiring the signing key refused on %q", inv.Field)
	}
	errAs[*fence.InvalidError](t, m.Apply(retire(2*sec, "nosuchkey")).Err)

	if r := mustOK(t, m, retire(2*sec, k1)); r.KeyID != k1 {
		t.Fatalf("retire KeyID %q", r.KeyID)
	}
	if got, want := keyStates(m), k1+":retiring:2 "+k2+":active:1"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
	if ks := m.KeySet(); len(ks.Keys) != 2 {
		t.Fatalf("a retiring key with live leases is not published: %+v", ks.Keys)
	}
	// A renew keeps lease a on k1 (its holder keeps k1's proof): the
	// retire still waits for it. Releasing b, then a, ends k1's last lease.
	mustOK(t, m, renew(3*sec, "a", 2, 0))
	if got := signerID(t, m, "a", 2); got != k1 {
		t.Fatalf("renewed lease signed by %q, want its own key %q", got, k1)
	}
	if got, want := keyStates(m), k1+":retiring:2 "+k2+":active:1"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
	mustOK(t, m, rel(3*sec, "b", 3))
	if got, want := keyStates(m), k1+":retiring:1 "+k2+":active:1"; got != want {
		t.Fatalf("keys %s, want %s (a, renewed, still holds k1)", got, want)
	}
	mustOK(t, m, rel(3*sec, "a", 2))
	if got, want := keyStates(m), k2+":active:1"; got != want {
		t.Fatalf("keys %s, want %s (k1 dropped)", got, want)
	}
	ks := m.KeySet()
	if len(ks.Keys) != 1 || ks.Keys[0].ID != k2 || ks.ClusterID != "c1" {
		t.Fatalf("key set %+v", ks)
	}
	// An expiry ends a lease too; a key retired with no lease goes at once.
	mustOK(t, m, rotate(4*sec, 3))
	mustOK(t, m, tick(4*sec+int64(2*time.Minute)))
	mustOK(t, m, retire(5*sec, k2))
	if got, want := keyStates(m), keyIDOfSeed(3)+":active:0"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
	// The proof LeaseSigner's key makes verifies under the key set.
	mustGrant(t, m, acq(6*sec, "d", "D", time.Minute), 5)
	k, cid, _ := m.LeaseSigner("d", 5)
	if err := m.KeySet().Verify(fence.Sign(k, cid, "d", 5), "d"); err != nil {
		t.Fatal(err)
	}
}

// A session-bound lease records its key too and gives it up when the
// session ends; its renew (a keepalive of its session) keeps it.
func TestKeySessionLeases(t *testing.T) {
	m := keyedMachine(t)
	mustOK(t, m, rotate(sec, 1))
	s := mustOK(t, m, Command{Op: OpSessionOpen, Now: sec, TTL: 10 * time.Second}).Session.ID
	tok := mustOK(t, m, Command{Op: OpAcquire, Now: sec, Name: "s", Owner: "S", Session: s}).Lease.Token
	mustOK(t, m, rotate(sec, 2))
	mustOK(t, m, retire(sec, keyIDOfSeed(1)))
	mustOK(t, m, Command{Op: OpRenew, Now: sec, Name: "s", Token: tok})
	if got, want := keyStates(m), keyIDOfSeed(1)+":retiring:1 "+keyIDOfSeed(2)+":active:0"; got != want {
		t.Fatalf("keys %s, want %s (the renew kept the lease on its key)", got, want)
	}
	mustOK(t, m, Command{Op: OpSessionClose, Now: 2 * sec, Session: s})
	if got, want := keyStates(m), keyIDOfSeed(2)+":active:0"; got != want {
		t.Fatalf("keys %s, want %s (the session's lease ended)", got, want)
	}
}

// keyLog is a log with rotations, retires, grants, renewals and ends.
func keyLog() []Command {
	return []Command{
		{Op: OpConfig, Now: sec, Config: DefaultConfig(), ClusterID: "c1"},
		acq(sec, "pre", "P", time.Hour),
		{Op: OpKeyRotate, Now: sec, Value: seed(1), Delta: 1},
		acq(sec, "a", "A", time.Minute),
		acq(sec, "b", "B", time.Minute),
		rotate(2*sec, 2),
		acq(2*sec, "c", "C", time.Minute),
		renew(2*sec, "a", 2, 0),
		retire(3*sec, keyIDOfSeed(1)),
		rotate(3*sec, 3),
		acq(3*sec, "d", "D", time.Minute),
		rel(3*sec, "c", 4),
		acq(3*sec, "e", "E", time.Minute),
		rotate(4*sec, 4),
		renew(4*sec, "d", 5, 0),
		retireNow(4*sec, keyIDOfSeed(3)), // d and e move to k4
		renew(4*sec, "pre", 1, 0),        // granted before any key: the renew signs it with k4
	}
}

// keyLogKeys is the keys keyLog leaves: k1 retiring with a and b (a was
// renewed after the rotation and kept k1), k2 verify-only with none (its
// lease c was released), k3 dropped by --now with d and e moved to k4,
// which signs pre too since its renew.
func keyLogKeys() string {
	return keyIDOfSeed(1) + ":retiring:2 " + keyIDOfSeed(2) + ":verify-only:0 " + keyIDOfSeed(4) + ":active:3"
}

// R1: the same log gives every replica the same key choice for every
// lease, hence the same proof bytes, and the same snapshot.
func TestKeySameLogSameChoice(t *testing.T) {
	a, b := New(), New()
	for _, c := range keyLog() {
		ra, rb := a.Apply(c), b.Apply(c)
		if describe(ra) != describe(rb) || ra.KeyID != rb.KeyID || ra.KeyLeases != rb.KeyLeases {
			t.Fatalf("%+v: %s vs %s", c, describe(ra), describe(rb))
		}
	}
	if got := keyStates(a); got != keyLogKeys() {
		t.Fatalf("keyLog leaves keys %s, want %s", got, keyLogKeys())
	}
	for _, li := range a.Locks("", a.Now()) {
		ka, ca, oka := a.LeaseSigner(li.Name, li.Lease.Token)
		kb, cb, okb := b.LeaseSigner(li.Name, li.Lease.Token)
		if oka != okb || !oka {
			t.Fatalf("lease %s: signer ok %v/%v", li.Name, oka, okb)
		}
		pa, pb := fence.Sign(ka, ca, li.Name, li.Lease.Token), fence.Sign(kb, cb, li.Name, li.Lease.Token)
		if pa.String() != pb.String() {
			t.Fatalf("lease %s: proofs differ: %s vs %s", li.Name, pa, pb)
		}
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("same log, different snapshots")
	}
}

// Keys survive a snapshot: the restored machine writes the same bytes,
// has the same keys with the same lease counts (recounted from the
// leases: a count is not stored), signs each lease with the same key, and
// drops a retiring key when its last lease ends as the original does.
func TestKeySnapshotRoundTrip(t *testing.T) {
	a := New()
	applyAll(t, a, keyLog())
	if !strings.Contains(keyStates(a), ":retiring:2") {
		t.Fatalf("keyLog leaves no retiring key with a lease: %s", keyStates(a))
	}
	snap := snapshotBytes(t, a)
	b := New()
	if err := b.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, b), snap) {
		t.Fatal("restore then snapshot differs")
	}
	if keyStates(a) != keyStates(b) {
		t.Fatalf("keys after restore %s, want %s", keyStates(b), keyStates(a))
	}
	for _, li := range a.Locks("", a.Now()) {
		if x, y := signerID(t, a, li.Name, li.Lease.Token), signerID(t, b, li.Name, li.Lease.Token); x != y {
			t.Fatalf("lease %s: signer %q after restore, want %q", li.Name, y, x)
		}
	}
	for _, c := range []Command{rel(5*sec, "b", 3), rel(5*sec, "a", 2)} { // k1's last leases
		mustOK(t, a, c)
		mustOK(t, b, c)
	}
	if keyStates(a) != keyStates(b) || strings.Contains(keyStates(b), "retiring") {
		t.Fatalf("after the last lease of the retiring key: %s vs %s", keyStates(b), keyStates(a))
	}
}

func applyKeysDoc(t *testing.T, m *Machine, change func(d *snapDoc)) error {
	t.Helper()
	d := m.snapshotView().doc
	change(d)
	var b bytes.Buffer
	if _, err := writeSnapDoc(&b, d); err != nil {
		t.Fatal(err)
	}
	return New().Restore(&b)
}

// Restore refuses keys that no log could have made.
func TestKeySnapshotRefusesInconsistentKeys(t *testing.T) {
	m := New()
	applyAll(t, m, keyLog())
	for name, change := range map[string]func(d *snapDoc){
		"short seed":        func(d *snapDoc) { d.Keys[0].Seed = d.Keys[0].Seed[:31] },
		"two active":        func(d *snapDoc) { d.Keys[0].Status = KeyActive },
		"last not active":   func(d *snapDoc) { d.Keys[len(d.Keys)-1].Status = KeyVerifyOnly },
		"repeated key":      func(d *snapDoc) { d.Keys[1].Seed = d.Keys[0].Seed },
		"bad status":        func(d *snapDoc) { d.Keys[0].Status = 9 },
		"unknown lease key": func(d *snapDoc) { d.Locks[0].Holder.Key = "nosuchkey" },
		"retiring, no lease": func(d *snapDoc) {
			for i := range d.Locks {
				if h := d.Locks[i].Holder; h != nil && h.Key == keyIDOfSeed(1) {
					h.Key = keyIDOfSeed(4)
				}
			}
		},
		"public-only signing key": func(d *snapDoc) {
			last := &d.Keys[len(d.Keys)-1]
			last.Public, last.Seed = ed25519.NewKeyFromSeed(last.Seed).Public().(ed25519.PublicKey), nil
		},
		"short public key": func(d *snapDoc) {
			d.Keys[0].Public, d.Keys[0].Seed = make([]byte, 31), nil
		},
		"seed and public key": func(d *snapDoc) { d.Keys[0].Public = make([]byte, ed25519.PublicKeySize) },
		"too many keys": func(d *snapDoc) {
			for i := len(d.Keys); i <= MaxRestoredKeys; i++ {
				d.Keys = append([]snapKey{{Seed: seed(byte(100 + i)), Status: KeyVerifyOnly}}, d.Keys...)
			}
		},
		"bad restored_from id":  func(d *snapDoc) { d.RestoredFrom = []string{"not ok!"} },
		"too many restored ids": func(d *snapDoc) { d.RestoredFrom = make([]string, MaxRestoredFrom+1) },
	} {
		if err := applyKeysDoc(t, m, change); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
	if err := applyKeysDoc(t, m, func(*snapDoc) {}); err != nil {
		t.Fatalf("unchanged doc: %v", err)
	}
}

// F6: a restore keeps every key public-only (proofs made before the backup
// verify; no old seed is left in the state or its snapshot, so a staging
// cluster restored from production cannot sign what production's guards
// accept), lists the old cluster id, and adds a fresh signing key. Live
// leases keep their key and its count (a retire of an old key still waits
// for them); their proofs are by the fresh key from then on, since the
// state has no seed of theirs.
func TestKeyRestoredCluster(t *testing.T) {
	m := New()
	applyAll(t, m, keyLog())
	before := keyStates(m)
	if err := m.SetRestoredClusterID("c2"); err != nil {
		t.Fatal(err)
	}
	id, err := m.AddRestoredKey(seed(9))
	if err != nil || id != keyIDOfSeed(9) {
		t.Fatalf("AddRestoredKey: %q, %v", id, err)
	}
	k1, k2, k4, k9 := keyIDOfSeed(1), keyIDOfSeed(2), keyIDOfSeed(4), keyIDOfSeed(9)
	// Every key is kept with its count; the old signing key is
	// verify-only now, the fresh one signs nothing yet.
	if got, want := keyStates(m), k1+":retiring:2 "+k2+":verify-only:0 "+k4+":verify-only:3 "+k9+":active:0"; got != want {
		t.Fatalf("keys after the restore %s, want %s (before: %s)", got, want, before)
	}
	for _, k := range m.SigningKeys() {
		if k.PublicOnly != (k.ID != k9) {
			t.Fatalf("key %s: public-only %v", k.ID, k.PublicOnly)
		}
	}
	ks := m.KeySet()
	if ks.ClusterID != "c2" || !slices.Equal(ks.RestoredFrom, []string{"c1"}) || len(ks.Keys) != 4 {
		t.Fatalf("restored key set %+v", ks)
	}
	// An old proof (cluster c1, old key) still verifies.
	if err := ks.Verify(fence.Sign(ed25519.NewKeyFromSeed(seed(4)), "c1", "d", 5), "d"); err != nil {
		t.Fatalf("a proof of the backed-up cluster: %v", err)
	}
	// No old seed is in the state's snapshot: only the fresh one.
	snap := snapshotBytes(t, m)
	for _, n := range []byte{1, 2, 3, 4} {
		if bytes.Contains(snap, seed(n)) {
			t.Fatalf("the restored snapshot holds the seed of key %s", keyIDOfSeed(n))
		}
	}
	if !bytes.Contains(snap, seed(9)) {
		t.Fatal("the restored snapshot lacks the fresh key's seed")
	}
	// Leases of public-only keys (a, b on k1; d, e, pre on k4) are signed by
	// the fresh key under c2; a new grant too.
	for _, li := range m.Locks("", m.Now()) {
		if li.Lease == nil {
			continue
		}
		if got := signerID(t, m, li.Name, li.Lease.Token); got != k9 {
			t.Fatalf("lease %s after the restore signed by %q, want the fresh key", li.Name, got)
		}
	}
	mustGrant(t, m, acq(m.Now(), "new", "N", time.Minute), 7)
	if got := signerID(t, m, "new", 7); got != k9 {
		t.Fatalf("a grant after restore signed by %q, want the fresh key", got)
	}
	// A retire of an old key waits for its leases, as before the restore.
	mustOK(t, m, retire(m.Now(), k4))
	if !strings.Contains(keyStates(m), k4+":retiring:3") {
		t.Fatalf("retiring k4 with three live leases: %s", keyStates(m))
	}
	// The snapshot round trip agrees (R1): same bytes, keys, counts and
	// signer per lease.
	snap = snapshotBytes(t, m)
	n := New()
	if err := n.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, n), snap) || keyStates(n) != keyStates(m) || !slices.Equal(n.RestoredFrom(), []string{"c1"}) {
		t.Fatalf("after a snapshot: keys %s (want %s), restored_from %v", keyStates(n), keyStates(m), n.RestoredFrom())
	}
	for _, li := range m.Locks("", m.Now()) {
		if li.Lease != nil && signerID(t, m, li.Name, li.Lease.Token) != signerID(t, n, li.Name, li.Lease.Token) {
			t.Fatalf("lease %s: signer differs after a snapshot", li.Name)
		}
	}
	for _, k := range n.SigningKeys() {
		if k.PublicOnly != (k.ID != k9) {
			t.Fatalf("key %s after a snapshot: public-only %v", k.ID, k.PublicOnly)
		}
	}
}

// A restore may go one key beyond MaxSigningKeys with its fresh key (and
// its snapshot loads); a rotation is then refused until a retire. A store
// restored at that count and restored again drops its oldest key that
// signs no lease to make room.
func TestKeyRestoreBeyondTheCap(t *testing.T) {
	m := keyedMachine(t)
	for i := range MaxSigningKeys {
		mustOK(t, m, rotate(sec, byte(10+i)))
	}
	mustGrant(t, m, acq(sec, "a", "A", time.Minute), 1) // by the last key
	if err := m.SetRestoredClusterID("c2"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddRestoredKey(seed(1)); err != nil {
		t.Fatalf("the restore's fresh key at the cap: %v", err)
	}
	if n := len(m.SigningKeys()); n != MaxSigningKeys+1 {
		t.Fatalf("%d keys, want %d", n, MaxSigningKeys+1)
	}
	n := New()
	if err := n.Restore(bytes.NewReader(snapshotBytes(t, m))); err != nil {
		t.Fatalf("a snapshot with the restore's key beyond the cap: %v", err)
	}
	errAs[*fence.ResourceExhaustedError](t, n.Apply(rotate(n.Now(), 2)).Err)
	if err := n.SetRestoredClusterID("c3"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.AddRestoredKey(seed(3)); err != nil {
		t.Fatalf("a restore of a restored store at the cap: %v", err)
	}
	keys := n.SigningKeys()
	if len(keys) != MaxSigningKeys+1 || keys[0].ID != keyIDOfSeed(11) {
		t.Fatalf("%d keys starting with %s, want %d starting with %s (the oldest, %s, dropped)", len(keys), keys[0].ID, MaxSigningKeys+1, keyIDOfSeed(11), keyIDOfSeed(10))
	}
}

// A restore of a store whose every key signs a live lease adds its fresh
// key beyond MaxSigningKeys (up to MaxRestoredKeys), and the snapshot of
// the result loads: such a backup is always restorable.
func TestKeyRestoreWithEveryKeyLive(t *testing.T) {
	m := keyedMachine(t)
	mustGrant(t, m, acq(sec, "k0", "A", time.Hour), 1)
	for i := range MaxSigningKeys - 1 {
		mustOK(t, m, rotate(sec, byte(10+i)))
		mustGrant(t, m, acq(sec, "k"+strconv.Itoa(i+1), "A", time.Hour), fence.Token(i+2))
	}
	for round := range 3 {
		if err := m.SetRestoredClusterID("r" + strconv.Itoa(round)); err != nil {
			t.Fatal(err)
		}
		if _, err := m.AddRestoredKey(seed(byte(200 + round))); err != nil {
			t.Fatalf("restore %d of a store whose %d keys all sign live leases: %v", round+1, len(m.SigningKeys()), err)
		}
		n := New()
		if err := n.Restore(bytes.NewReader(snapshotBytes(t, m))); err != nil {
			t.Fatalf("the snapshot after restore %d (%d keys): %v", round+1, len(m.SigningKeys()), err)
		}
		m = n
		// The restored cluster grants a lease under its fresh key: every
		// key signs a live lease again.
		mustOK(t, m, acq(m.Now(), "r"+strconv.Itoa(round), "A", time.Hour))
	}
	if got := len(m.SigningKeys()); got <= MaxSigningKeys+1 {
		t.Fatalf("%d keys after three restores of a store whose keys all sign live leases, want more than %d", got, MaxSigningKeys+1)
	}
}

// F1/F2: a renew never moves a lease off the key it was granted under —
// standalone or session-bound, before or after a rotation — so the proof
// its holder was handed (a `fence run` child has only that one) keeps
// verifying, the proof a renew or a Get hands out is by the same key, and
// a retire of that key waits for the lease.
func TestKeyRenewKeepsItsKey(t *testing.T) {
	m := keyedMachine(t)
	mustOK(t, m, rotate(sec, 1))
	k1, k2 := keyIDOfSeed(1), keyIDOfSeed(2)
	mustGrant(t, m, acq(sec, "a", "A", time.Minute), 1)
	s := mustOK(t, m, Command{Op: OpSessionOpen, Now: sec, TTL: 10 * time.Second}).Session.ID
	stok := mustOK(t, m, Command{Op: OpAcquire, Now: sec, Name: "s", Owner: "S", Session: s}).Lease.Token
	k, cid, _ := m.LeaseSigner("a", 1)
	held := fence.Sign(k, cid, "a", 1) // what a's holder keeps
	mustOK(t, m, rotate(2*sec, 2))
	for i := range 3 {
		now := int64(3+i) * sec
		mustOK(t, m, renew(now, "a", 1, 0))
		mustOK(t, m, Command{Op: OpRenew, Now: now, Name: "s", Token: stok})
		for name, tok := range map[string]fence.Token{"a": 1, "s": stok} {
			if got := signerID(t, m, name, tok); got != k1 {
				t.Fatalf("renew %d: lease %s signed by %q, want its grant's key %q", i+1, name, got, k1)
			}
		}
	}
	if got, want := keyStates(m), k1+":verify-only:2 "+k2+":active:0"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
	mustOK(t, m, retire(6*sec, k1))
	if got, want := keyStates(m), k1+":retiring:2 "+k2+":active:0"; got != want {
		t.Fatalf("keys %s, want %s (the retire waits for the renewed leases)", got, want)
	}
	if err := m.KeySet().Verify(held, "a"); err != nil {
		t.Fatalf("the proof a's holder kept, after renews across a rotation and a retire: %v", err)
	}
}

// F5: `fence keys retire ID --now` drops a key at once, even with live
// leases (standalone and session-bound): they move to the signing key, the
// count follows them, a Get's proof verifies under the current key while
// the old proof is refused; releasing a moved lease is counted on the new
// key. The signing key (also the only one) is refused with a typed error
// naming key_id; a non-admin is refused.
func TestKeyRetireNow(t *testing.T) {
	m := keyedMachine(t)
	mustOK(t, m, rotate(sec, 1))
	k1, k2 := keyIDOfSeed(1), keyIDOfSeed(2)
	inv := errAs[*fence.InvalidError](t, m.Apply(retireNow(sec, k1)).Err)
	if inv.Field != "key_id" || !strings.Contains(inv.Bound, "rotate first") {
		t.Fatalf("--now of the only key refused with %+v", inv)
	}
	mustGrant(t, m, acq(sec, "a", "A", time.Minute), 1)
	mustGrant(t, m, acq(sec, "b", "B", time.Minute), 2)
	s := mustOK(t, m, Command{Op: OpSessionOpen, Now: sec, TTL: 10 * time.Second}).Session.ID
	stok := mustOK(t, m, Command{Op: OpAcquire, Now: sec, Name: "s", Owner: "S", Session: s}).Lease.Token
	k, cid, _ := m.LeaseSigner("a", 1)
	leaked := fence.Sign(k, cid, "a", 1)
	mustOK(t, m, rotate(2*sec, 2))
	if inv := errAs[*fence.InvalidError](t, m.Apply(retireNow(2*sec, k2)).Err); inv.Field != "key_id" {
		t.Fatalf("--now of the signing key refused on %q", inv.Field)
	}
	mustOK(t, m, Command{Op: OpAuthBootstrap, Now: 2 * sec, Name: "root", Value: hashOf("s0")})
	errAs[*fence.PermissionDeniedError](t, m.Apply(Command{Op: OpKeyRetire, Now: 2 * sec, Name: k1, Delta: 1, Principal: "token:x"}).Err)

	r := mustOK(t, m, retireNow(2*sec, k1))
	if r.KeyID != k1 || r.KeyLeases != 3 {
		t.Fatalf("retire --now: KeyID %q, KeyLeases %d; want %q, 3", r.KeyID, r.KeyLeases, k1)
	}
	if got, want := keyStates(m), k2+":active:3"; got != want {
		t.Fatalf("keys %s, want %s (k1 dropped, its leases on k2)", got, want)
	}
	ks := m.KeySet()
	for name, tok := range map[string]fence.Token{"a": 1, "b": 2, "s": stok} {
		if got := signerID(t, m, name, tok); got != k2 {
			t.Fatalf("lease %s after --now signed by %q, want %q", name, got, k2)
		}
		k, cid, _ := m.LeaseSigner(name, tok)
		if err := ks.Verify(fence.Sign(k, cid, name, tok), name); err != nil {
			t.Fatalf("the new proof of %s: %v", name, err)
		}
	}
	if err := ks.Verify(leaked, "a"); !errors.Is(err, fence.ErrForgedToken) {
		t.Fatalf("the dropped key's proof: %v, want FORGED_TOKEN", err)
	}
	// The count follows the moved leases: their ends are counted on k2,
	// which a later retire then drops with its last lease.
	mustOK(t, m, rotate(3*sec, 3))
	mustOK(t, m, retire(3*sec, k2))
	mustOK(t, m, rel(3*sec, "a", 1))
	mustOK(t, m, Command{Op: OpSessionClose, Now: 3 * sec, Session: s})
	if got, want := keyStates(m), k2+":retiring:1 "+keyIDOfSeed(3)+":active:0"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
	mustOK(t, m, tick(3*sec+int64(2*time.Minute))) // b expires
	if got, want := keyStates(m), keyIDOfSeed(3)+":active:0"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
}

// goldenKeyCommands are the key commands, pinned like goldenCommands.
func goldenKeyCommands() []Command {
	return []Command{
		{Op: OpKeyRotate, Now: 21, Value: seed(0xa5), Delta: 1},
		{Op: OpKeyRotate, Now: 22, Value: seed(0x5a), Principal: "token:0123456789abcdef", Admin: true},
		{Op: OpKeyRetire, Now: 23, Name: keyIDOfSeed(0xa5), Admin: true},
		{Op: OpKeyRetire, Now: 24, Name: keyIDOfSeed(0xa5), Delta: 1, Admin: true}, // --now
	}
}

// TestKeyCommandsGolden pins the encoding of the key commands
// (testdata/commands_keys.golden, like commands.golden).
func TestKeyCommandsGolden(t *testing.T) {
	var b strings.Builder
	cmds := goldenKeyCommands()
	for _, c := range cmds {
		enc, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d\t%s\n", c.Op, hex.EncodeToString(enc))
	}
	golden(t, "commands_keys.golden", []byte(b.String()))
	for i, line := range strings.Split(strings.TrimSuffix(readGolden(t, "commands_keys.golden"), "\n"), "\n") {
		_, h, _ := strings.Cut(line, "\t")
		enc, _ := hex.DecodeString(h)
		var d Command
		if err := d.UnmarshalBinary(enc); err != nil || !sameCommand(d, cmds[i]) || !bytes.Equal(d.Value, cmds[i].Value) {
			t.Fatalf("line %d decodes to %+v (%v)", i+1, d, err)
		}
	}
}

// TestSnapshotKeysGolden pins the snapshot bytes of keys (header keys —
// seeded and public-only — and restored_from, a grant's key): keyLog's
// machine, restored into a new cluster with a fresh key, is compared with
// testdata/snapshot_keys.golden, which restores to a machine that writes
// it again.
func TestSnapshotKeysGolden(t *testing.T) {
	m := New()
	applyAll(t, m, keyLog())
	if err := m.SetRestoredClusterID("c2"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddRestoredKey(seed(9)); err != nil {
		t.Fatal(err)
	}
	got := snapshotBytes(t, m)
	golden(t, "snapshot_keys.golden", []byte(hex.EncodeToString(got)+"\n"))
	want, err := hex.DecodeString(strings.TrimSpace(readGolden(t, "snapshot_keys.golden")))
	if err != nil {
		t.Fatal(err)
	}
	n := New()
	if err := n.Restore(bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, n), want) || keyStates(n) != keyStates(m) {
		t.Fatal("the golden keys snapshot does not restore to itself")
	}
}

// After a restore, a lease under a public-only key gets its proofs from
// whichever key signs when they are handed out — the restore's fresh key,
// then a later one — and the state does not record which. So a key that
// could sign waits, once retired, until no lease under a public-only key
// is left (an outside test had a renewed lease's proof, by the fresh key,
// refused after a rotation and a plain retire of that key). A snapshot
// taken while it waits loads; when the last such lease ends it goes.
func TestKeyRetireWaitsForRestoredLeases(t *testing.T) {
	m := keyedMachine(t)
	mustOK(t, m, rotate(sec, 1))
	mustGrant(t, m, acq(sec, "old", "A", time.Hour), 1)
	if err := m.SetRestoredClusterID("c2"); err != nil {
		t.Fatal(err)
	}
	fresh, err := m.AddRestoredKey(seed(9))
	if err != nil {
		t.Fatal(err)
	}
	// The holder renews: its proof is by the fresh key now.
	mustOK(t, m, renew(2*sec, "old", 1, time.Hour))
	if k, _, ok := m.LeaseSigner("old", 1); !ok || keyIDOf(k) != fresh {
		t.Fatalf("the restored lease's proof is not by the fresh key %s", fresh)
	}
	mustOK(t, m, rotate(3*sec, 10))
	mustOK(t, m, retire(4*sec, fresh))
	if !hasKey(m, fresh) {
		t.Fatalf("the fresh key was dropped while a restored lease (whose proof it made) lives: %s", keyStates(m))
	}
	n := New()
	if err := n.Restore(bytes.NewReader(snapshotBytes(t, m))); err != nil {
		t.Fatalf("a snapshot with a retired key waiting for restored leases: %v", err)
	}
	mustOK(t, m, rel(5*sec, "old", 1))
	if hasKey(m, fresh) {
		t.Fatalf("the retired fresh key outlived the last restored lease: %s", keyStates(m))
	}
}

func keyIDOf(k ed25519.PrivateKey) string {
	return fence.KeyIDOf(k.Public().(ed25519.PublicKey))
}

func hasKey(m *Machine, id string) bool {
	for _, k := range m.SigningKeys() {
		if k.ID == id {
			return true
		}
	}
	return false
}
