package chaos

import (
	"slices"
	"strings"
	"testing"
)

func forgeOp(n int, kind string, out Outcome, reason string, before, after Stored) Op {
	return Op{Worker: forgerWorker, N: n, Kind: KindForge, Store: StorePostgres, Res: "forge-0", Token: 9,
		Forge: kind, Out: out, Reason: reason, Call: 1, Return: 2, Before: &before, After: &after}
}

// a complete history of a guard with keys: one honest write accepted, every
// forgery refused as FORGED_TOKEN with the store unchanged.
func refusedRound() []Op {
	s := Stored{Guard: 5, Token: 5, Version: 3}
	ops := []Op{forgeOp(1, ForgeHonest, OutcomeOK, "", Stored{Guard: 4, Token: 4, Version: 2}, s)}
	for i, k := range ForgeKinds {
		ops = append(ops, forgeOp(i+2, k, OutcomeFail, "FORGED_TOKEN", s, s))
	}
	return ops
}

// The forgery checker counts what it must: accepted forgeries, refused
// ones that moved the store (or were not read again), refusals other
// than FORGED_TOKEN, the forger's own tokens refused, and kinds never
// judged; writes of unknown outcome are not judged.
func TestCheckForgeries(t *testing.T) {
	moved := Stored{Guard: 9, Token: 9, Version: 4}
	for _, tc := range []struct {
		name  string
		edit  func([]Op) []Op
		check func(forgeryReport) bool
	}{
		{"all refused", func(o []Op) []Op { return o }, func(r forgeryReport) bool {
			return r.forgeries == len(ForgeKinds) && r.accepted+r.changed+r.misrefused+r.honestRefused == 0 && r.honestOK == 1 && len(r.untried) == 0
		}},
		{"one accepted", func(o []Op) []Op { o[3].Out, o[3].Reason, o[3].After = OutcomeOK, "", &moved; return o }, func(r forgeryReport) bool {
			return r.accepted == 1 && r.acceptedBy[o3kind()] == 1 && r.changed == 0
		}},
		{"refused but the guard row moved", func(o []Op) []Op { o[2].After = &moved; return o }, func(r forgeryReport) bool {
			return r.changed == 1 && r.accepted == 0
		}},
		{"refused, not read again", func(o []Op) []Op { o[2].After = nil; return o }, func(r forgeryReport) bool { return r.changed == 1 }},
		{"refused as stale", func(o []Op) []Op { o[4].Out, o[4].Reason = OutcomeStale, "STALE_TOKEN"; return o }, func(r forgeryReport) bool {
			return r.misrefused == 1 && r.changed == 0
		}},
		{"honest refused", func(o []Op) []Op { o[0].Out, o[0].Reason = OutcomeFail, "FORGED_TOKEN"; return o }, func(r forgeryReport) bool {
			return r.honestRefused == 1 && slices.Equal(r.untried, []string{ForgeHonest})
		}},
		{"a kind only unknown", func(o []Op) []Op { o[1].Out, o[1].After = OutcomeUnknown, &moved; return o }, func(r forgeryReport) bool {
			return slices.Equal(r.untried, []string{ForgeKinds[0]}) && r.changed == 0 && r.forgeries == len(ForgeKinds)-1
		}},
	} {
		r := checkForgeries(tc.edit(refusedRound()), 0)
		if !tc.check(r) {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}

func o3kind() string { return ForgeKinds[2] }

// The forgery checker in the verdict: an accepted forgery fails a run and
// passes a control run (which must show one); a refused forgery that moved
// the store fails both; a history without the forger is judged as before.
func TestForgeryVerdict(t *testing.T) {
	accepted := refusedRound()
	accepted[2].Out, accepted[2].Reason = OutcomeOK, ""
	honest := refusedRound()
	honest = append(honest, honest[0])
	honest[len(honest)-1].Out, honest[len(honest)-1].Reason = OutcomeFail, "FORGED_TOKEN"
	moved := append(refusedRound(), accepted[2])
	moved[3].After = &Stored{Guard: 99}
	for _, tc := range []struct {
		name          string
		ops           []Op
		fenced, contr bool // Holds(false), Holds(true) apart from checker 1
	}{
		{"all refused", refusedRound(), true, false},
		{"one accepted", accepted, false, true},
		{"one accepted, a refused one moved the store", moved, false, false},
		{"an honest token refused", honest, false, false},
	} {
		r := Report{Linearizable: true}
		fr := checkForgeries(tc.ops, 0)
		r.Forgeries, r.ForgeriesAccepted, r.ForgeriesChanged, r.ForgeriesMisrefused = fr.forgeries, fr.accepted, fr.changed, fr.misrefused
		r.HonestAccepted, r.HonestRefused, r.ForgeUntried = fr.honestOK, fr.honestRefused, fr.untried
		if got := r.Holds(false); got != tc.fenced {
			t.Errorf("%s: Holds(fenced) = %v, want %v", tc.name, got, tc.fenced)
		}
		r.StaleAccepted = 1 // the control run's checker 1
		if got := r.Holds(true); got != tc.contr {
			t.Errorf("%s: Holds(control) = %v, want %v", tc.name, got, tc.contr)
		}
		// With restores an honest refusal is reported, not failed.
		r.StaleAccepted, r.Restores = 0, 1
		if got := r.Holds(false); tc.name == "an honest token refused" && !got {
			t.Errorf("%s, with a restore: Holds(fenced) = false, want true", tc.name)
		}
	}
}

// A worker's write refused as FORGED_TOKEN is an honest token refused: it
// fails the run as the forger's own would; the worker's op stays in the
// history the other checkers judge.
func TestWorkerWriteRefusedAsForged(t *testing.T) {
	w := Op{Worker: 3, N: 8, Kind: KindWrite, Store: StorePostgres, Res: "sku-0", Token: 4, Fenced: true,
		Call: 1, Return: 2, Out: OutcomeFail, Reason: "FORGED_TOKEN"}
	rest, forged := splitForgeries(append(refusedRound(), w))
	if len(rest) != 1 || rest[0].Kind != KindWrite {
		t.Fatalf("rest = %+v", rest)
	}
	r := checkForgeries(forged, 0)
	if r.honestRefused != 1 || r.honestOK != 1 || !slices.ContainsFunc(r.problems, func(p string) bool { return strings.HasPrefix(p, "w3#8: ") }) {
		t.Fatalf("%+v", r)
	}
}

// With restores, the forger must have had its own token accepted after
// the first one let clients in again: the guard's key set followed the
// restored cluster.
func TestForgeryHonestAfterRestore(t *testing.T) {
	ops := refusedRound() // the honest write is called at 1
	if r := checkForgeries(ops, 5); !slices.Equal(r.untried, []string{forgeAfterRestore}) {
		t.Errorf("honest write before the restore only: untried %v", r.untried)
	}
	ops[0].Call, ops[0].Return = 6, 7
	if r := checkForgeries(ops, 5); len(r.untried) != 0 {
		t.Errorf("honest write after the restore: untried %v", r.untried)
	}
}
