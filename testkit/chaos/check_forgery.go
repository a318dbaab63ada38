package chaos

import (
	"fmt"
	"slices"

	"github.com/fenceworks/fence"
)

// forgeryReport is the forgery checker's verdict on the forger's ops
// (KindForge; see forger.go). Its counts go into Report.
type forgeryReport struct {
	forgeries, accepted, changed, misrefused int
	honestOK, honestRefused                  int
	acceptedBy                               map[string]int
	untried                                  []string
	problems                                 []string
}

// checkForgeries judges the forger's writes:
//
//   - accepted: a forgery (any kind but ForgeHonest) the guard accepted
//     (outcome ok). A guard with the cluster's key set must accept none;
//     the control run's guard (no key set) must accept some;
//   - changed: a refused forgery (stale or fail) after which the resource's
//     stored tokens (the guard row's last token, the data row's token and
//     version) differ from before it, or could not be read again: a refusal
//     must leave the store as it was;
//   - misrefused: a forgery refused for another reason than FORGED_TOKEN
//     (a guard that compares before it verifies says STALE_TOKEN to a
//     forgery below the stored token);
//   - honest refused: the forger's own signed token refused (a guard that
//     refuses everything would accept no forgery either); honest OK counts
//     the accepted ones;
//   - untried: a kind of forgery with no write of a definite outcome, or no
//     honest write accepted, or — with restoredAt, the time the first
//     restore let clients in again (0: no restore) — none of the forger's
//     accepted after it: the run did not show what it says (that the
//     guard's key set follows a restored cluster).
//
// Writes of unknown outcome are not judged (the commit may have happened).
func checkForgeries(ops []Op, restoredAt int64) forgeryReport {
	r := forgeryReport{acceptedBy: map[string]int{}}
	if len(ops) == 0 {
		return r
	}
	tried := map[string]bool{}
	problem := func(format string, args ...any) {
		if len(r.problems) < maxProblems {
			r.problems = append(r.problems, fmt.Sprintf(format, args...))
		}
	}
	for i := range ops {
		o := &ops[i]
		if o.Out == OutcomeUnknown {
			continue
		}
		if o.Forge == ForgeHonest {
			if o.Out == OutcomeOK {
				r.honestOK++
				tried[ForgeHonest] = true
				if restoredAt != 0 && o.Worker == forgerWorker && o.Call > restoredAt {
					tried[forgeAfterRestore] = true
				}
			} else {
				r.honestRefused++
				problem("%s: its own signed token %d at %s refused (%s %s): %s", forgeWho(o), o.Token, o.Res, o.Out, o.Reason, o.Err)
			}
			continue
		}
		r.forgeries++
		tried[o.Forge] = true
		if o.Out == OutcomeOK {
			r.accepted++
			r.acceptedBy[o.Forge]++
			problem("forger#%d: forged token accepted: %s token %d at %s (stored before %s, after %s)", o.N, o.Forge, o.Token, o.Res, fmtStored(o.Before), fmtStored(o.After))
			continue
		}
		if o.Reason != string(fence.ReasonForgedToken) {
			r.misrefused++
			problem("forger#%d: forgery %s token %d at %s refused as %s %q, not FORGED_TOKEN", o.N, o.Forge, o.Token, o.Res, o.Out, o.Reason)
		}
		if o.Before == nil || o.After == nil || *o.Before != *o.After {
			r.changed++
			problem("forger#%d: refused forgery %s token %d at %s: stored before %s, after %s (must be unchanged)", o.N, o.Forge, o.Token, o.Res, fmtStored(o.Before), fmtStored(o.After))
		}
	}
	kinds := append([]string{ForgeHonest}, ForgeKinds...)
	if restoredAt != 0 {
		kinds = append(kinds, forgeAfterRestore)
	}
	for _, k := range kinds {
		if !tried[k] {
			r.untried = append(r.untried, k)
		}
	}
	if len(r.untried) > 0 {
		problem("forger: no write of a definite outcome of %v (for %s: none accepted; %s: none of its own accepted after the first restore): the forgery checker could not judge them",
			r.untried, ForgeHonest, forgeAfterRestore)
	}
	slices.Sort(r.untried)
	return r
}

// forgeWho names the writer of a forge op: the forger, or a worker whose
// honest write was refused as forged.
func forgeWho(o *Op) string {
	if o.Worker == forgerWorker {
		return fmt.Sprintf("forger#%d", o.N)
	}
	return fmt.Sprintf("w%d#%d", o.Worker, o.N)
}

func fmtStored(s *Stored) string {
	if s == nil {
		return "(not read)"
	}
	return fmt.Sprintf("guard=%d token=%d version=%d", s.Guard, s.Token, s.Version)
}

// forgeAfterRestore names, in ForgeUntried, the forger's honest writes
// after the first restore.
const forgeAfterRestore = "honest-after-restore"

// splitForgeries takes the forger's ops out of a history, and adds the
// workers' writes and adds refused as FORGED_TOKEN to the forger's: a
// worker's lease token is as honest as the forger's own.
func splitForgeries(ops []Op) (rest, forged []Op) {
	for _, o := range ops {
		switch {
		case o.Kind == KindForge:
			forged = append(forged, o)
		case (o.Kind == KindWrite || o.Kind == KindAdd) && o.Reason == string(fence.ReasonForgedToken):
			h := o
			h.Kind, h.Forge, h.N = KindForge, ForgeHonest, o.N
			forged = append(forged, h)
			rest = append(rest, o)
		default:
			rest = append(rest, o)
		}
	}
	return rest, forged
}
