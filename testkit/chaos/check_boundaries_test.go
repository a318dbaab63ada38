package chaos

import (
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

// Lock boundaries (issue 23) in the checkers: synthetic histories of sets,
// shared and exclusive holds and permits, each good one passing and each
// with a planted violation caught by its checker (and by no other that
// has no reason to).

// ckMode gives an acquire or release a mode and permits; session makes
// its release strict (exactly once by seq).
func ckMode(o Op, mode string, permits uint32) Op {
	o.Mode, o.Permits, o.Session = mode, permits, true
	o.CallMono, o.RetMono = o.Call, o.Return
	return o
}

// ckHold is an acquire and its release of lock by token: granted
// call..from, held from..until, released until..until+5 (deadline at
// until+100).
func ckHold(b *ckHist, w int, lock, mode string, permits uint32, tok uint64, call, from, until int64) {
	b.add(ckMode(ckAcquire(w, lock, tok, call, from), mode, permits))
	r := ckMode(ckRelease(w, lock, tok, from, until, until, until+5), mode, permits)
	r.DeadlineMono = until + 100
	b.add(r)
}

func ckSet(locks ...string) []LockRef {
	var out []LockRef
	for _, l := range locks {
		ref := LockRef{Name: l}
		if name, mode, ok := strings.Cut(l, " "); ok {
			ref.Name, ref.Mode = name, mode
		}
		out = append(out, ref)
	}
	return out
}

// ckSetHold is ckHold for a set: one acquire and one release naming
// every lock; the grant lists them with proofs of tok.
func ckSetHold(b *ckHist, w int, set []LockRef, tok uint64, call, from, until int64) {
	a := ckMode(ckAcquire(w, set[0].Name, tok, call, from), "", 0)
	a.Set = set
	for _, s := range set {
		s.Proof = tok
		a.Granted = append(a.Granted, s)
	}
	b.add(a)
	r := ckMode(ckRelease(w, set[0].Name, tok, from, until, until, until+5), "", 0)
	r.Set, r.DeadlineMono = set, until+100
	b.add(r)
}

func ckLook(w int, lock string, permits uint32, call int64, holders ...LockRef) Op {
	return Op{Worker: w, Kind: KindHolders, Lock: lock, Permits: permits, Holders: holders, Call: call, Return: call + 2}
}

func ckTok(tok uint64, mode string) LockRef { return LockRef{Token: tok, Mode: mode} }

func ckProblems(r Report) string { return strings.Join(r.Problems, "\n") }

// ckOnly checks the named counts, and that the checkers unrelated to a
// lock's holds held.
func ckOnly(t *testing.T, r Report, overlaps, permits, sets, tokens, stale int) {
	t.Helper()
	if r.Overlaps != overlaps || r.PermitsExceeded != permits || r.SetsBroken != sets || r.TokensRegressed != tokens || r.StaleAccepted != stale {
		t.Fatalf("want overlaps %d permits %d sets %d tokens %d stale %d: %+v\n%s", overlaps, permits, sets, tokens, stale, r, ckProblems(r))
	}
	// (a grant beside a holder also ends that holder early, and its
	// history is not linearizable: checkers 3b and 6 may flag it too)
	if r.Malformed != 0 || r.LostWrites != 0 || r.DoubleApplies != 0 || r.MissingFinal != 0 || r.Empty {
		t.Fatalf("other checkers flagged: %+v\n%s", r, ckProblems(r))
	}
}

// Checker 3 by mode: shared holds overlap, an exclusive one overlaps
// nothing; a look at the holders listing an exclusive beside another is
// an overlap too.
func TestCheckModesExclusion(t *testing.T) {
	good := func() *ckHist {
		b := &ckHist{}
		ckHold(b, 1, "rw-0", ModeShared, 0, 5, 10, 20, 100)
		ckHold(b, 2, "rw-0", ModeShared, 0, 6, 30, 40, 120) // beside 5
		ckHold(b, 3, "rw-0", "", 0, 7, 50, 130, 200)        // waited for both
		ckHold(b, 4, "rw-0", ModeShared, 0, 8, 60, 210, 300)
		b.add(ckLook(5, "rw-0", 0, 50, ckTok(5, ModeShared), ckTok(6, ModeShared)))
		b.add(ckLook(5, "rw-0", 0, 150, ckTok(7, "")))
		return b
	}
	r := Check(good().ops, "", 0)
	ckMustOK(t, r)
	if r.HolderLooks != 2 {
		t.Fatalf("holder looks %d, want 2", r.HolderLooks)
	}

	// planted: an exclusive grant beside a shared holder
	b := good()
	ckHold(b, 6, "rw-0", "", 0, 9, 250, 260, 280) // inside shared 8's hold
	r = Check(b.ops, "", 0)
	ckOnly(t, r, 1, 0, 0, 0, 0)
	if !strings.Contains(ckProblems(r), "overlap on lock rw-0: token 8 (w4#2) held 00:00:00.000000–00:00:00.000000 (shared), token 9 (w6#2) held 00:00:00.000000–00:00:00.000000 (exclusive)") {
		t.Fatalf("problem line: %q", r.Problems)
	}
	// planted: a shared grant beside the exclusive holder
	b = good()
	ckHold(b, 6, "rw-0", ModeShared, 0, 9, 140, 150, 160) // inside exclusive 7's hold
	ckOnly(t, Check(b.ops, "", 0), 1, 0, 0, 0, 0)

	// planted: the server lists an exclusive holder beside a shared one
	b = good().add(ckLook(5, "rw-0", 0, 150, ckTok(7, ""), ckTok(8, ModeShared)))
	r = Check(b.ops, "", 0)
	ckOnly(t, r, 1, 0, 0, 0, 0)
	if !strings.Contains(ckProblems(r), "overlap on lock rw-0: w5#3 saw exclusive token 7 among 2 holders [7, 8 shared]") {
		t.Fatalf("problem line: %q", r.Problems)
	}
}

// Checker 3c: at most N permit holders at once, by their holds and by a
// look at the holders; holds naming other counts conflict (checker 3).
func TestCheckPermits(t *testing.T) {
	good := func() *ckHist {
		b := &ckHist{}
		ckHold(b, 1, "permit-0", "", 2, 5, 10, 20, 100)
		ckHold(b, 2, "permit-0", "", 2, 6, 30, 40, 120)
		ckHold(b, 3, "permit-0", "", 2, 7, 50, 100, 200) // after 5 ended
		b.add(ckLook(4, "permit-0", 2, 60, ckTok(5, ""), ckTok(6, "")))
		return b
	}
	ckMustOK(t, Check(good().ops, "", 0))

	// planted: a third holder of 2 permits
	b := good()
	ckHold(b, 5, "permit-0", "", 2, 8, 60, 110, 130) // beside 6 and 7
	r := Check(b.ops, "", 0)
	ckOnly(t, r, 0, 1, 0, 0, 0)
	if !strings.Contains(ckProblems(r), "permits exceeded on lock permit-0: token 8 (w5#2) held 00:00:00.000000–00:00:00.000000 beside 2 other holders [6 7] of its 2 permits") {
		t.Fatalf("problem line: %q", r.Problems)
	}
	// planted: the server lists three holders of 2 permits
	b = good().add(ckLook(4, "permit-0", 2, 110, ckTok(5, ""), ckTok(6, ""), ckTok(7, "")))
	r = Check(b.ops, "", 0)
	ckOnly(t, r, 0, 1, 0, 0, 0)
	if !strings.Contains(ckProblems(r), "permits exceeded on lock permit-0: w4#2 saw 3 holders [5, 6, 7] of its 2 permits") {
		t.Fatalf("problem line: %q", r.Problems)
	}
	// planted: a holder of another count beside them (a mismatch let in)
	b = good()
	ckHold(b, 5, "permit-0", "", 3, 8, 60, 130, 140)
	ckOnly(t, Check(b.ops, "", 0), 1, 0, 0, 0, 0)
}

// Checker 3d: a set is granted whole (every lock, one token, a proof of
// it for each) and ends whole.
func TestCheckSetsWhole(t *testing.T) {
	set := ckSet("catalog shared", "sku-1")
	good := func() *ckHist {
		b := &ckHist{}
		ckSetHold(b, 1, set, 5, 10, 20, 100)
		ckSetHold(b, 2, ckSet("catalog shared", "sku-2"), 6, 30, 40, 110) // beside it: catalog shared
		ckHold(b, 3, "catalog", "", 0, 7, 50, 120, 200)                   // the import waited for both
		ckSetHold(b, 1, ckSet("catalog shared", "sku-1"), 8, 150, 210, 300)
		b.add(ckLook(4, "sku-1", 0, 60, ckTok(5, "")))  // during the set
		b.add(ckLook(4, "sku-1", 0, 101, ckTok(5, ""))) // its release not returned yet
		b.add(ckLook(4, "sku-1", 0, 106))               // after
		return b
	}
	r := Check(good().ops, "", 0)
	ckMustOK(t, r)
	if !r.Linearizable {
		t.Fatal(r.LinearDetail)
	}
	// a grant lost before the worker saw the lease (client.LostError:
	// recorded ok with its error and no lease) lists nothing: not judged
	b := good()
	b.ops[0].Granted, b.ops[0].Err = nil, "lease of lock \"catalog\" with token 5 lost: expired"
	ckMustOK(t, Check(b.ops, "", 0))

	for _, c := range []struct {
		name  string
		plant func(a *Op)
		want  string
	}{
		{"a lock missing", func(a *Op) { a.Granted = a.Granted[:1] }, "set not granted whole: w1#1 asked for [catalog shared, sku-1], token 5; the lease lists [catalog shared]"},
		{"another token's proof", func(a *Op) { a.Granted[1].Proof = 4 }, "the lease lists [catalog shared, sku-1 (proof of token 4)]"},
		{"another mode", func(a *Op) { a.Granted[0].Mode = "" }, "the lease lists [catalog, sku-1]"},
	} {
		b := good()
		c.plant(&b.ops[0])
		r := Check(b.ops, "", 0)
		ckOnly(t, r, 0, 0, 1, 0, 0)
		if !strings.Contains(ckProblems(r), c.want) {
			t.Fatalf("%s: problem line: %q", c.name, r.Problems)
		}
	}

	// planted: sku-1 still held by set 5 after its release returned
	b = good().add(ckLook(4, "sku-1", 0, 106, ckTok(5, "")))
	r = Check(b.ops, "", 0)
	ckOnly(t, r, 0, 0, 1, 0, 0)
	if !strings.Contains(ckProblems(r), "set not held whole: w4#4 saw set token 5 (w1#1) holding sku-1 at 00:00:00.000000, after the set ended: its release by catalog (w1#2) returned") {
		t.Fatalf("problem line: %q", r.Problems)
	}
	// planted: set 6 lost catalog (the import's exclusive grant returned
	// at 120) but still holds sku-2, its release never sent
	b = &ckHist{}
	a := ckMode(ckAcquire(2, "catalog", 6, 30, 40), "", 0)
	a.Set, a.Granted = ckSet("catalog shared", "sku-2"), []LockRef{{Name: "catalog", Mode: ModeShared, Proof: 6}, {Name: "sku-2", Proof: 6}}
	b.add(a)
	rel := ckMode(ckRelease(2, "catalog", 6, 40, 110, 300, 305), "", 0)
	rel.Set, rel.Out, rel.DeadlineMono = a.Set, OutcomeStale, 400
	b.add(rel)
	ckHold(b, 3, "catalog", "", 0, 7, 50, 120, 200)
	b.add(ckLook(4, "sku-2", 0, 150, ckTok(6, "")))
	r = Check(b.ops, "", 0)
	if r.SetsBroken != 1 || !strings.Contains(ckProblems(r), "set not held whole: w4#1 saw set token 6 (w2#1) holding sku-2 at 00:00:00.000000, after the set ended: token 7 (w3#1, exclusive) was granted") {
		t.Fatalf("partial expiry: %+v\n%s", r, ckProblems(r))
	}
	// (its hold of catalog runs to 110, before 7's at 120, and its early
	// end is the early-expiry checker's: 7 returned before 6's deadline)
	if r.Overlaps != 0 || r.EarlyExpiry != 1 {
		t.Fatalf("partial expiry: %+v\n%s", r, ckProblems(r))
	}
}

// Checker 2 over sets and shared grants: a set's grant counts once (its
// token on every lock is not a token granted twice), and a grant of any
// mode called after another returned has a larger token.
func TestCheckTokensBoundaries(t *testing.T) {
	good := func() *ckHist {
		b := &ckHist{}
		ckSetHold(b, 1, ckSet("set-0", "set-3", "set-5"), 5, 10, 20, 100)
		ckHold(b, 2, "rw-0", ModeShared, 0, 6, 30, 40, 100)
		ckHold(b, 3, "permit-0", "", 4, 7, 50, 60, 100)
		return b
	}
	ckMustOK(t, Check(good().ops, "", 0))
	for name, plant := range map[string]func(b *ckHist){
		"shared after set": func(b *ckHist) { ckHold(b, 4, "rw-0", ModeShared, 0, 4, 30, 45, 100) },
		"set after permit": func(b *ckHist) { ckSetHold(b, 4, ckSet("set-1", "set-2"), 6, 70, 80, 100) },
		"permit after set": func(b *ckHist) { ckHold(b, 4, "permit-0", "", 4, 5, 25, 30, 100) },
		"set token twice":  func(b *ckHist) { ckSetHold(b, 4, ckSet("set-1", "set-2"), 5, 5, 15, 100) },
	} {
		b := good()
		plant(b)
		r := Check(b.ops, "", 0)
		if r.TokensRegressed != 1 {
			t.Fatalf("%s: %+v\n%s", name, r, ckProblems(r))
		}
	}
}

// Checker 1 over writes made under a set's token and a shared lease: the
// catalog import's write with a larger token, then a paused SKU worker's
// older one accepted, is a stale write.
func TestCheckStaleUnderSets(t *testing.T) {
	good := func() *ckHist {
		b := &ckHist{}
		ckSetHold(b, 1, ckSet("catalog shared", "sku-0"), 5, 10, 20, 100)
		b.add(ckWrite(1, 5, 9, 1, 30, 40))
		ckHold(b, 2, "catalog", "", 0, 6, 50, 100, 200)
		b.add(ckWrite(2, 6, 100, 2, 110, 120))
		r := ckRefusal(1, 5, 6, 130, 140) // the paused SKU worker wakes: refused
		b.add(r)
		return b
	}
	ckMustOK(t, Check(good().add(ckFinal(100, 6, 2, 300)).ops, "", 0))
	// planted: the store accepts the paused worker's write
	b := good()
	b.ops = b.ops[:len(b.ops)-1]
	b.add(ckWrite(1, 5, 8, 3, 130, 140)).add(ckFinal(8, 5, 3, 300))
	r := Check(b.ops, "", 0)
	if r.StaleAccepted != 1 || r.Linearizable || !strings.Contains(ckProblems(r), "stale write accepted on fence:stock/sku-0: w1#5 write token 5 got version 3, after w2#3 token 6 version 2") {
		t.Fatalf("%+v\n%s", r, ckProblems(r))
	}
}

// Checker 3b by mode: a shared lease is not ended by a later shared grant,
// and is by a later exclusive one.
func TestCheckEarlyExpiryModes(t *testing.T) {
	b := &ckHist{}
	// shared 5 (deadline 300, paused: released at 900); shared 6 granted
	// at 50: fine
	a := ckMode(ckAcquire(1, "rw-0", 5, 10, 20), ModeShared, 0)
	rel := ckMode(ckRelease(1, "rw-0", 5, 20, 300, 900, 905), ModeShared, 0)
	rel.DeadlineMono, rel.Out = 300, OutcomeStale
	b.add(a).add(rel)
	ckHold(b, 2, "rw-0", ModeShared, 0, 6, 30, 50, 100)
	if r := Check(b.ops, "", 0); !r.OK() || r.Expiries != 0 {
		t.Fatalf("%+v\n%s", r, ckProblems(r))
	}
	// exclusive 7 granted at 250, before 5's deadline: early
	ckHold(b, 3, "rw-0", "", 0, 7, 60, 250, 260)
	r := Check(b.ops, "", 0)
	if r.EarlyExpiry != 1 || r.EarlyWorst != 50 {
		t.Fatalf("%+v\n%s", r, ckProblems(r))
	}
	if r.Overlaps != 1 { // and 5's recorded hold (to 300) overlaps 7's
		t.Fatalf("%+v\n%s", r, ckProblems(r))
	}
}

// The lock model of checker 6: shared holders released (strictly, by
// session) in any order, an exclusive grant after them.
func TestCheckLinearModes(t *testing.T) {
	b := &ckHist{}
	ckHold(b, 1, "rw-0", ModeShared, 0, 5, 10, 20, 100)
	ckHold(b, 2, "rw-0", ModeShared, 0, 6, 30, 40, 80) // released first
	ckHold(b, 3, "rw-0", "", 0, 7, 50, 110, 200)
	r := Check(b.ops, "", 0)
	ckMustOK(t, r)
	if !r.Linearizable {
		t.Fatal(r.LinearDetail)
	}
	// planted: shared 5's strict release acknowledged after exclusive 7
	// was granted: 7's grant ended every holder
	b = &ckHist{}
	ckHold(b, 1, "rw-0", ModeShared, 0, 5, 10, 20, 300)
	ckHold(b, 3, "rw-0", "", 0, 7, 50, 110, 200)
	r = Check(b.ops, "", 0)
	if r.Linearizable || r.Overlaps != 1 {
		t.Fatalf("%+v\n%s", r, ckProblems(r))
	}
}

// A look records how each holder holds the lock looked at: a set's lease
// by its entry for that lock (its own Mode is not any one lock's; a
// 3-node run flagged two shared set holders as exclusive before this).
func TestHolderRefOfASet(t *testing.T) {
	set := fence.Lease{Name: "set-0", Token: 7, Locks: []fence.LockSpec{{Name: "set-0", Mode: fence.Shared}, {Name: "set-4"}}}
	if r := holderRef(set, "set-0"); r.Mode != ModeShared || r.Token != 7 {
		t.Fatalf("set-0: %+v", r)
	}
	if r := holderRef(set, "set-4"); r.Mode != "" {
		t.Fatalf("set-4: %+v", r)
	}
	if r := holderRef(fence.Lease{Name: "rw-0", Token: 8, Mode: fence.Shared}, "rw-0"); r.Mode != ModeShared {
		t.Fatalf("one lock: %+v", r)
	}
}
