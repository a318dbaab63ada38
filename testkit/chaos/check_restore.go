package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// Restores in a history (FaultRestore). A restore rolls the built-in store
// back to its backup: acknowledged writes made after the backup are gone,
// versions are issued again, and an op_id applied after the backup may
// apply once more. Those checks of the built-in store are therefore scoped
// to restore epochs; everything else stays global.
//
// Epoch 0 runs from the start to the first restore's cut (KindRestore's
// Call: from then on no request reaches a node, and no reply a worker);
// epoch k from restore k's opening (its Return) to the next cut or the end.
// Each resource of the built-in store becomes one register per epoch,
// named "stock/sku-N@epochK", and the checkers judge each one as they judge
// a whole run's register:
//
//   - its start is the restored state read before any client could reach
//     the restored cluster (KindRestored): a synthetic fenced write of that
//     value and token at version 1, versions of the epoch shifted to
//     follow it (epoch 0 starts empty);
//   - its end is the read made right after the cut (KindFinal inside the
//     cut; the run's final read for the last epoch);
//   - an op whose call and return fall in one epoch is that epoch's, its
//     call moved no earlier than the epoch's opening (a request made
//     while the clients were cut off can only apply after it); a mutation
//     that spans a restore (called before a cut, returned — or of unknown
//     outcome — after the opening) may have applied in either epoch: it is
//     a mutation of unknown outcome in each; a read that spans one is left
//     out, and so is a refusal of one attempt; a refusal after retries is
//     a mutation of unknown outcome in each epoch before the one that
//     refused it (an earlier attempt may have applied there, and the
//     restore forgot its op_id).
//
// So within each epoch: no stale write accepted (checker 1, starting from
// the restored token), nothing acknowledged lost and nothing applied twice
// (4, 5), linearizable (6). Across a restore, what is checked instead
// (RestoreMismatch) is that the backup was consistent and is what came
// back: every write acknowledged before the backup was called is in it
// (a leader's backup; a follower's may be behind: only a prefix), none
// called after it returned is, the restored value and last token are
// the ones the epoch had at the restored version, and the backup's counter
// is at least the restored last token.
//
// Global, over every epoch: granted tokens unique and increasing (2: a
// restore must raise the counter above every token issued before it, the
// backup's and the ones after it), no overlapping holds (3), no lease
// ended early (3b: the cut lasts at least the longest TTL), the PostgreSQL
// guard store's checks (1, 4, 5, 6: it is not restored). In the lock
// model, a session release after a restore of a lease granted before its
// cut is taken as loose (its OK may come from the restored lease: the
// state holds leases as of the backup).

// restoreRec is one restore of a history.
type restoreRec struct {
	num        int
	cut, open  int64
	backupCall int64 // the restored backup's call (KindRestore's Value)
	backup     *Op
	restored   map[string]*Op // res → OK KindRestored
	first      uint64
}

// restoreScope is what scopeRestores found.
type restoreScope struct {
	restores []*restoreRec // by cut
	problems []string      // restore mismatches
	missing  []string      // epochs that could not be checked (no restored read)
}

func epochRes(res string, e int) string { return fmt.Sprintf("%s@epoch%d", res, e) }

// scopeRestores rewrites the built-in store's ops into per-epoch registers
// (see above) and returns the history without the restore records. A
// history without restores is returned as it is.
func scopeRestores(ops []Op) ([]Op, *restoreScope) {
	sc := &restoreScope{}
	// The records of a restore go together: its backup by its call time
	// (KindRestore's Value), its restored reads by time (made between its
	// cut and its opening).
	var rest, backups, restoredReads []Op
	for i := range ops {
		o := ops[i]
		switch o.Kind {
		case KindRestore:
			if o.Call > 0 && o.Return > o.Call {
				sc.restores = append(sc.restores, &restoreRec{num: o.N, cut: o.Call, open: o.Return, first: o.Token,
					backupCall: o.Value, restored: map[string]*Op{}})
			}
		case KindBackup:
			if o.Out == OutcomeOK && o.Return > 0 {
				backups = append(backups, o)
			}
		case KindRestored:
			if o.Out == OutcomeOK {
				restoredReads = append(restoredReads, o)
			}
		default:
			rest = append(rest, o)
		}
	}
	if len(sc.restores) == 0 {
		return rest, sc
	}
	sort.Slice(sc.restores, func(i, j int) bool { return sc.restores[i].cut < sc.restores[j].cut })
	for _, r := range sc.restores {
		for j := range backups {
			if b := &backups[j]; b.Call == r.backupCall {
				r.backup = b
			}
		}
		for j := range restoredReads {
			o := &restoredReads[j]
			if o.Call >= r.cut && o.Call < r.open {
				r.restored[o.Res] = o
			}
		}
	}
	R := sc.restores
	last := len(R)
	epochOfCall := func(t int64) int {
		e := 0
		for e < last && R[e].cut <= t {
			e++
		}
		return e
	}
	epochOfReturn := func(t int64) int {
		e := 0
		for e < last && R[e].open <= t {
			e++
		}
		return e
	}
	// shift[e][res]: versions of epoch e (≥ 1) are the restored version
	// less shift; ok false: the restored state is unknown
	type start struct {
		shift uint64
		ok    bool
	}
	starts := func(e int, res string) start {
		if e == 0 {
			return start{ok: true}
		}
		ro := R[e-1].restored[res]
		if ro == nil {
			return start{}
		}
		if ro.Version == 0 {
			return start{ok: true}
		}
		return start{shift: ro.Version - 1, ok: true}
	}
	shiftVer := func(v uint64, s start) uint64 {
		if v == 0 {
			return 0
		}
		if v <= s.shift {
			return 1 // below the restored state: collides with the start (an anomaly the checkers report)
		}
		return v - s.shift
	}
	openOf := func(e int) int64 {
		if e == 0 {
			return 0
		}
		return R[e-1].open
	}
	unscoped := map[string]bool{}
	var out []Op
	n := 0
	for _, o := range rest {
		if o.Store != StoreFence {
			out = append(out, o)
			continue
		}
		switch o.Kind {
		case KindFinal:
			e := epochOfReturn(o.Call)
			s := starts(e, o.Res)
			if !s.ok {
				unscoped[epochRes(o.Res, e)] = true
				continue
			}
			o.Res, o.Version = epochRes(o.Res, e), shiftVer(o.Version, s)
			out = append(out, o)
		case KindWrite, KindAdd, KindRead:
			a := epochOfCall(o.Call)
			b := a
			definite := o.Out != OutcomeUnknown && o.Return > 0
			if definite {
				b = max(a, epochOfReturn(o.Return))
			} else {
				b = min(a+1, last)
			}
			if a == b && definite || a == last {
				s := starts(a, o.Res)
				if !s.ok {
					unscoped[epochRes(o.Res, a)] = true
					continue
				}
				o.Res, o.Version = epochRes(o.Res, a), shiftVer(o.Version, s)
				o.Call = max(o.Call, openOf(a))
				if o.Return > 0 && o.Return < o.Call {
					o.Return = o.Call
				}
				out = append(out, o)
				continue
			}
			if o.Kind == KindRead {
				continue // spans a restore: which epoch it saw is unknown
			}
			if o.Out == OutcomeStale || o.Out == OutcomeFail {
				if o.Attempts <= 1 {
					continue // one attempt, refused: it applied in no epoch
				}
				// Refused in epoch b, but an earlier attempt may have
				// applied in an epoch before it, its reply lost: a
				// restore then forgot its op_id, so the retry was judged
				// afresh (a chaos run saw an add applied in epoch 1 and
				// its retry refused stale in epoch 2). Unknown in each
				// epoch before b; in b the refusal is definite (an
				// attempt applied there would have been replayed).
				b--
			}
			// a mutation that may have applied in any epoch from a to b
			for e := a; e <= b; e++ {
				if !starts(e, o.Res).ok {
					unscoped[epochRes(o.Res, e)] = true
					continue
				}
				c := o
				c.Res, c.Out, c.Return, c.Version, c.ResValue, c.LastToken, c.Replayed = epochRes(o.Res, e), OutcomeUnknown, 0, 0, 0, 0, false
				c.Call = max(o.Call, openOf(e))
				c.Err = "spans a restore: " + o.Err
				out = append(out, c)
			}
		default:
			out = append(out, o)
		}
	}
	// each epoch's start: the restored state as a fenced write at version 1
	for e := 1; e <= last; e++ {
		r := R[e-1]
		var names []string
		for res := range r.restored {
			names = append(names, res)
		}
		sort.Strings(names)
		for _, res := range names {
			ro := r.restored[res]
			if ro.Version == 0 {
				continue
			}
			n++
			out = append(out, Op{Worker: -1, N: 1_000_000 + n, Kind: KindWrite, Store: StoreFence, Res: epochRes(res, e),
				Fenced: true, Token: ro.LastToken, Value: ro.ResValue, Call: r.open - 2, Return: r.open - 1, Out: OutcomeOK,
				ResValue: ro.ResValue, LastToken: ro.LastToken, Version: 1, Err: fmt.Sprintf("restore #%d's restored state", r.num)})
		}
	}
	var miss []string
	for k := range unscoped {
		miss = append(miss, k)
	}
	sort.Strings(miss)
	for _, k := range miss {
		sc.missing = append(sc.missing, fmt.Sprintf("%s: no restored read of the epoch's start: not checked", k))
	}
	// lock model: a session release after a cut of a lease granted before it
	granted := map[uint64]int64{}
	for _, o := range out {
		if o.Kind == KindAcquire && o.Out == OutcomeOK {
			if c, ok := granted[o.Token]; !ok || o.Call < c {
				granted[o.Token] = o.Call
			}
		}
	}
	for i := range out {
		o := &out[i]
		if o.Kind != KindRelease || o.Out != OutcomeOK || !o.Session {
			continue
		}
		g, ok := granted[o.Token]
		if ok && epochOfCall(g) < epochOfCall(o.Call) {
			o.restoredLease = true
		}
	}
	sc.checkBackups(out, epochOfCall, func(e int, res string) (uint64, bool) {
		s := starts(e, res)
		return s.shift, s.ok
	})
	SortOps(out)
	return out, sc
}

// checkBackups checks each restore's backup against the epoch it was taken
// in (see above), over the scoped ops.
//
// The backup restored may be older than the epoch the restore ends (taken
// before an earlier restore): it is checked against the epoch it was taken
// in.
func (sc *restoreScope) checkBackups(ops []Op, epochOfCall func(int64) int, shiftOf func(e int, res string) (uint64, bool)) {
	byRes := map[string][]*Op{}
	for i := range ops {
		o := &ops[i]
		if o.Store == StoreFence && o.Out == OutcomeOK {
			byRes[o.Res] = append(byRes[o.Res], o)
		}
	}
	for _, r := range sc.restores {
		if r.backup == nil {
			sc.problems = append(sc.problems, fmt.Sprintf("restore #%d: no record of its backup", r.num))
			continue
		}
		b := r.backup
		leaderBackup := b.Role == "" || strings.EqualFold(b.Role, "leader")
		e := epochOfCall(b.Call) // the epoch the backup was taken in
		if e >= len(sc.restores) || b.Return > sc.restores[e].cut || b.Return > r.cut {
			sc.problems = append(sc.problems, fmt.Sprintf("restore #%d: its backup (%s) does not end before the cut after it", r.num, fmtSpan(*b)))
			continue
		}
		var names []string
		for res := range r.restored {
			names = append(names, res)
		}
		sort.Strings(names)
		for _, res := range names {
			ro := r.restored[res]
			if ro.LastToken > b.Token {
				sc.problems = append(sc.problems, fmt.Sprintf("restore #%d: %s came back with last token %d, above the backup's counter %d",
					r.num, res, ro.LastToken, b.Token))
			}
			shift, ok := shiftOf(e, res)
			if !ok {
				continue
			}
			vb := uint64(0)
			if ro.Version > 0 {
				if ro.Version <= shift {
					sc.problems = append(sc.problems, fmt.Sprintf("restore #%d: %s came back at version %d, before its epoch's start (version %d)",
						r.num, res, ro.Version, shift+1))
					continue
				}
				vb = ro.Version - shift
			}
			key := epochRes(res, e)
			for _, o := range byRes[key] {
				switch o.Kind {
				case KindWrite, KindAdd:
					if o.Worker < 0 {
						break // the epoch's synthetic start
					}
					// a leader's backup confirms it leads and waits for
					// what was committed (read index): it holds every write
					// acknowledged before it was called; a follower's is a
					// consistent prefix of the log, possibly behind
					if leaderBackup && o.Return < b.Call && o.Version > vb {
						sc.problems = append(sc.problems, fmt.Sprintf("restore #%d: %s %s %s token %d acknowledged (%s) before the backup was called (%s), version %d, but the backup holds version %d",
							r.num, key, fmtOp(*o), o.Kind, o.Token, fmtSpan(*o), fmtClock(b.Call), o.Version, vb))
					}
					if o.Version <= vb && o.Call > b.Return {
						sc.problems = append(sc.problems, fmt.Sprintf("restore #%d: %s %s %s token %d (%s) called after the backup returned (%s), yet its version %d is in the backup (version %d)",
							r.num, key, fmtOp(*o), o.Kind, o.Token, fmtSpan(*o), fmtClock(b.Return), o.Version, vb))
					}
				}
				if o.Version != vb || vb == 0 {
					continue
				}
				var val int64
				var tok uint64
				switch o.Kind {
				case KindWrite:
					val, tok = o.Value, o.Token
				case KindAdd:
					val, tok = o.ResValue, o.Token
				case KindRead, KindFinal:
					val, tok = o.ResValue, o.LastToken
				default:
					continue
				}
				if val != ro.ResValue || tok != ro.LastToken {
					sc.problems = append(sc.problems, fmt.Sprintf("restore #%d: %s came back as value %d token %d at version %d, but %s %s saw value %d token %d there (%s)",
						r.num, key, ro.ResValue, ro.LastToken, vb, fmtOp(*o), o.Kind, val, tok, fmtSpan(*o)))
				}
			}
			if vb == 0 && (ro.ResValue != 0 || ro.LastToken != 0) {
				sc.problems = append(sc.problems, fmt.Sprintf("restore #%d: %s came back at version 0 with value %d token %d", r.num, key, ro.ResValue, ro.LastToken))
			}
		}
	}
}
