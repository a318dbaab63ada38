package state

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"slices"
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

// G9: every lease records the key that was the signing key at its grant; a
// renew moves it to the signing key of then. A retire is refused for the
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
	// A renew moves lease a to k2; releasing b ends k1's last lease.
	mustOK(t, m, renew(3*sec, "a", 2, 0))
	if got := signerID(t, m, "a", 2); got != k2 {
		t.Fatalf("renewed lease signed by %q, want %q", got, k2)
	}
	if got, want := keyStates(m), k1+":retiring:1 "+k2+":active:2"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
	}
	mustOK(t, m, rel(3*sec, "b", 3))
	if got, want := keyStates(m), k2+":active:2"; got != want {
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
// session ends; its renew moves it.
func TestKeySessionLeases(t *testing.T) {
	m := keyedMachine(t)
	mustOK(t, m, rotate(sec, 1))
	s := mustOK(t, m, Command{Op: OpSessionOpen, Now: sec, TTL: 10 * time.Second}).Session.ID
	mustOK(t, m, Command{Op: OpAcquire, Now: sec, Name: "s", Owner: "S", Session: s})
	mustOK(t, m, rotate(sec, 2))
	mustOK(t, m, retire(sec, keyIDOfSeed(1)))
	if got, want := keyStates(m), keyIDOfSeed(1)+":retiring:1 "+keyIDOfSeed(2)+":active:0"; got != want {
		t.Fatalf("keys %s, want %s", got, want)
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
	}
}

// R1: the same log gives every replica the same key choice for every
// lease, hence the same proof bytes, and the same snapshot.
func TestKeySameLogSameChoice(t *testing.T) {
	a, b := New(), New()
	for _, c := range keyLog() {
		ra, rb := a.Apply(c), b.Apply(c)
		if describe(ra) != describe(rb) || ra.KeyID != rb.KeyID {
			t.Fatalf("%+v: %s vs %s", c, describe(ra), describe(rb))
		}
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
	if !strings.Contains(keyStates(a), ":retiring:1") {
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
	c := rel(4*sec, "b", 3) // k1's last lease
	mustOK(t, a, c)
	mustOK(t, b, c)
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
		"short seed":            func(d *snapDoc) { d.Keys[0].Seed = d.Keys[0].Seed[:31] },
		"two active":            func(d *snapDoc) { d.Keys[0].Status = KeyActive },
		"last not active":       func(d *snapDoc) { d.Keys[len(d.Keys)-1].Status = KeyVerifyOnly },
		"repeated key":          func(d *snapDoc) { d.Keys[1].Seed = d.Keys[0].Seed },
		"bad status":            func(d *snapDoc) { d.Keys[0].Status = 9 },
		"unknown lease key":     func(d *snapDoc) { d.Locks[0].Holder.Key = "nosuchkey" },
		"retiring, no lease":    func(d *snapDoc) { d.Locks[1].Holder.Key = d.Locks[3].Holder.Key },
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

// A restore keeps every key, lists the old cluster id, and adds a fresh
// signing key.
func TestKeyRestoredCluster(t *testing.T) {
	m := New()
	applyAll(t, m, keyLog())
	before := m.KeySet()
	if err := m.SetRestoredClusterID("c2"); err != nil {
		t.Fatal(err)
	}
	id, err := m.AddRestoredKey(seed(9))
	if err != nil || id != keyIDOfSeed(9) {
		t.Fatalf("AddRestoredKey: %q, %v", id, err)
	}
	ks := m.KeySet()
	// Every key is kept but the retiring one, whose last lease moved to
	// the fresh key.
	var ids []string
	for _, k := range ks.Keys {
		ids = append(ids, k.ID)
	}
	if want := []string{keyIDOfSeed(2), keyIDOfSeed(3), keyIDOfSeed(9)}; ks.ClusterID != "c2" || !slices.Equal(ks.RestoredFrom, []string{"c1"}) || !slices.Equal(ids, want) {
		t.Fatalf("restored key set %+v, want keys %v (before: %+v)", ks, want, before)
	}
	// An old proof (cluster c1, old key) still verifies; a new grant is
	// signed by the new key under c2.
	// Every live lease moved to the fresh key.
	k, c, _ := m.LeaseSigner("d", 5)
	if c != "c2" || fence.KeyIDOf(k.Public().(ed25519.PublicKey)) != keyIDOfSeed(9) {
		t.Fatalf("live lease d: signer %s under %q (want the fresh key under c2)", fence.KeyIDOf(k.Public().(ed25519.PublicKey)), c)
	}
	if strings.Contains(keyStates(m), "retiring") {
		t.Fatalf("the retiring key outlived its leases' move: %s", keyStates(m))
	}
	oldProof := fence.Sign(ed25519.NewKeyFromSeed(seed(3)), "c1", "d", 5)
	if err := ks.Verify(oldProof, "d"); err != nil {
		t.Fatalf("a proof of the backed-up cluster: %v", err)
	}
	mustGrant(t, m, acq(m.Now(), "new", "N", time.Minute), 6)
	if got := signerID(t, m, "new", 6); got != keyIDOfSeed(9) {
		t.Fatalf("a grant after restore signed by %q, want the fresh key", got)
	}
	snap := snapshotBytes(t, m)
	n := New()
	if err := n.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.RestoredFrom(), []string{"c1"}) {
		t.Fatalf("restored_from after a snapshot: %v", n.RestoredFrom())
	}
}

// goldenKeyCommands are the key commands, pinned like goldenCommands.
func goldenKeyCommands() []Command {
	return []Command{
		{Op: OpKeyRotate, Now: 21, Value: seed(0xa5), Delta: 1},
		{Op: OpKeyRotate, Now: 22, Value: seed(0x5a), Principal: "token:0123456789abcdef", Admin: true},
		{Op: OpKeyRetire, Now: 23, Name: keyIDOfSeed(0xa5), Admin: true},
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

// TestSnapshotKeysGolden pins the snapshot bytes of keys (header keys and
// restored_from, a grant's key): keyLog's machine, restored into a new
// cluster, is compared with testdata/snapshot_keys.golden, which restores
// to a machine that writes it again.
func TestSnapshotKeysGolden(t *testing.T) {
	m := New()
	applyAll(t, m, keyLog())
	if err := m.SetRestoredClusterID("c2"); err != nil {
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
