package chaos

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Report is the checkers' verdict on one history.
type Report struct {
	Ops int // operations in the history (every Op, of every outcome), the forger's apart

	// StaleAccepted (checker 1): OK writes and adds whose token is below the
	// token of an OK mutation with a lower version on the same resource.
	// A fenced store must keep it 0; the control run (plain writes) must not.
	StaleAccepted int
	// TokensRegressed (checker 2): granted tokens that repeat an earlier
	// grant, or are not above the token of a grant that returned before
	// they were called.
	TokensRegressed int
	// Overlaps (checker 3): holds (a release's HeldFrom..HeldUntil; a
	// set's release holds each of its locks) that overlap an earlier hold
	// of another token of the same lock where either is exclusive (shared
	// holds may overlap; permit holds are PermitsExceeded's), and looks at
	// a lock's holders (KindHolders) that list an exclusive holder beside
	// another.
	Overlaps int
	// PermitsExceeded (checker 3c): permit holds that began while the
	// lock's N permits were held by other tokens, and looks at a lock's
	// holders that list more than its N.
	PermitsExceeded int
	// SetsBroken (checker 3d): sets not held whole: a grant whose lease
	// does not list exactly the set's locks, each with a proof of the
	// set's token, and looks at a lock's holders that list a set's token
	// after the set ended (its release returned, or a conflicting later
	// grant on another of its locks returned).
	SetsBroken int
	// HolderLooks (informational): OK looks at a lock's holders; with
	// none, the holder-based parts of checkers 3, 3c and 3d had nothing to
	// look at.
	HolderLooks int
	// EarlyExpiry (checker 3b): leases that ended before their safe
	// deadline on the host's monotonic clock (Op.DeadlineMono: the TTL the
	// server reported at the last successful grant or renew, less the
	// documented drift of 1%) without being released: a later token of the
	// same lock was granted before it. EarlyWorst is the largest shortfall.
	EarlyExpiry int
	EarlyWorst  time.Duration
	// Expiries (informational): leases the early-expiry checker judged —
	// not released before a later token of their lock was granted, so
	// ended by the server (expiry, or their session's). With none, that
	// checker had nothing to look at.
	Expiries int
	// LostWrites (checker 4): acknowledged mutations the final state does
	// not account for.
	LostWrites int
	// DoubleApplies (checker 5): mutations applied more often than the
	// history allows.
	DoubleApplies int

	// MissingFinal: resources (store, resource) that some op of the
	// history touches but that have no OK final read (absent, torn, failed
	// or of unknown outcome): checkers 4 and 5 could not check them.
	MissingFinal int
	// Malformed: records the checkers cannot take at their word: a
	// definite outcome (ok, stale, fail) without a return time or returning
	// before its call (taken as returning at +inf), an unknown kind or
	// outcome (taken as unknown), a plain write refused as stale, and an OK
	// acquire without a release record of its lock and token (checker 3
	// sees holds only through release records).
	Malformed int
	// Empty: the history has no operation of any worker.
	Empty bool
	// StaleRefused (informational, not part of OK): fenced writes and adds
	// refused as stale, i.e. how often fencing actually refused something.
	// Those that quote the store's last token (rt) are checked by checker 6:
	// the token must be below the register's last token, and rt equal to it.
	StaleRefused int

	// Restores (informational): restores in the history (FaultRestore);
	// with any, the built-in store's checks are scoped to the epochs
	// between them (see scopeRestores). RestoreMismatch: a backup that was
	// not consistent or did not come back as taken (an acknowledged write
	// before it missing, a write after it in it, another value or token at
	// the restored version, a last token above the backup's counter).
	Restores        int
	RestoreMismatch int

	// The forgery checker (checker 7, check_forgery.go), on the forger's
	// writes at the PostgreSQL guard (forger.go). Forgeries: forged tokens
	// the guard answered (accepted or refused). ForgeriesAccepted: those it
	// accepted — 0 with the cluster's key set; the control run's guard
	// has none and must accept some. ForgeriesChanged: refused forgeries
	// after which the stored tokens were not what they were before.
	// ForgeriesMisrefused: refused, but not as FORGED_TOKEN. HonestAccepted
	// and HonestRefused: the forger's own signed tokens, and HonestRefused
	// also the workers' writes refused as FORGED_TOKEN (a guard refusing
	// everything accepts no forgery either). An honest refusal fails a run
	// without restores; with restores it is reported only: a lease of a
	// cluster a restore discarded (a backup older than the last restore
	// brings back a cluster id without that branch in restored_from), or
	// written while the nodes were cut off and the guard could not fetch
	// the new key set, is rightly refused. ForgeUntried: kinds without a
	// judged write (ForgeHonest: none accepted). ForgeriesAcceptedBy: per
	// kind. All zero in a history without the forger.
	Forgeries, ForgeriesAccepted, ForgeriesChanged, ForgeriesMisrefused int
	HonestAccepted, HonestRefused                                       int
	ForgeUntried                                                        []string
	ForgeriesAcceptedBy                                                 map[string]int

	// Linearizable (checker 6): every register (store, resource) and every
	// lock passed porcupine within the time limit.
	Linearizable bool
	LinearDetail string

	// Problems: the first ~20 violations, human readable (worker#counter,
	// tokens, versions, times), from every checker in turn.
	Problems []string
	// Visualizations: porcupine HTML files written for failing partitions.
	Visualizations []string
}

// OK reports whether every checker held: no stale write accepted, no token
// regressed, no overlap, no lost write, no double apply, linearizable, no
// forgery accepted or refused other than as FORGED_TOKEN, and the history
// was complete enough to check: not empty, a final read of every resource,
// no malformed record. A control run is expected to fail it with
// StaleAccepted > 0 and ForgeriesAccepted > 0 (OKExceptStale is the rest).
func (r Report) OK() bool {
	return r.StaleAccepted == 0 && r.ForgeriesAccepted == 0 && r.ForgeriesMisrefused == 0 && r.OKExceptStale()
}

// OKExceptStale is OK without checker 1 and without the forgery checker's
// accepted and misrefused counts (a guard without keys accepts forgeries,
// and may refuse one as stale): what a control run must pass. A refused
// forgery must still leave the store unchanged, and the forger's honest
// writes must still be accepted.
func (r Report) OKExceptStale() bool {
	return r.TokensRegressed == 0 && r.Overlaps == 0 && r.PermitsExceeded == 0 && r.SetsBroken == 0 && r.EarlyExpiry == 0 && r.LostWrites == 0 && r.DoubleApplies == 0 && r.RestoreMismatch == 0 &&
		r.ForgeriesChanged == 0 && (r.HonestRefused == 0 || r.Restores > 0) && len(r.ForgeUntried) == 0 &&
		r.Linearizable && r.MissingFinal == 0 && r.Malformed == 0 && !r.Empty
}

// Holds is the run's verdict on its history: every checker held, or, for a
// control run (plain writes, a guard without keys), checker 1 caught stale
// writes, the forgery checker saw forgeries accepted (when the history has
// the forger's writes), and every other checker held.
func (r Report) Holds(control bool) bool {
	if control {
		return r.StaleAccepted > 0 && (r.Forgeries == 0 || r.ForgeriesAccepted > 0) && r.OKExceptStale()
	}
	return r.OK()
}

// maxProblems bounds Report.Problems.
const maxProblems = 20

// Check runs the checkers over a history (every worker's ops and the
// harness's KindFinal reads, in any order), and says what they could not
// check: resources without an OK final read (MissingFinal), malformed
// records (Malformed), no worker ops at all (Empty). outDir receives porcupine's
// visualisation of each non-linearizable partition (linear-<partition>.html);
// linTimeout bounds the whole linearizability check (0: no bound; the
// partitions run a few at a time, each cut into segments of ~1000 ops); a
// partition not done by then is reported as timed out and makes
// Linearizable false.
func Check(ops []Op, outDir string, linTimeout time.Duration) Report {
	r := Report{Ops: len(ops)}
	ops, forged := splitForgeries(ops)
	r.Ops = len(ops) // the workers' and the harness's: the forger's are Forgeries and HonestAccepted/Refused
	ops, sc := scopeRestores(ops)
	var firstOpen int64
	if len(sc.restores) > 0 {
		firstOpen = sc.restores[0].open
	}
	fr := checkForgeries(forged, firstOpen)
	r.Forgeries, r.ForgeriesAccepted, r.ForgeriesChanged, r.ForgeriesMisrefused = fr.forgeries, fr.accepted, fr.changed, fr.misrefused
	r.HonestAccepted, r.HonestRefused, r.ForgeUntried, r.ForgeriesAcceptedBy = fr.honestOK, fr.honestRefused, fr.untried, fr.acceptedBy
	r.Restores = len(sc.restores)
	h := newChkHistory(ops)

	var probs [14][]string
	probs[11] = fr.problems
	r.PermitsExceeded, probs[12] = checkPermits(h)
	var cuts []int64
	for _, rr := range sc.restores {
		cuts = append(cuts, rr.cut)
	}
	r.SetsBroken, probs[13] = checkSets(h, cuts)
	for _, hs := range h.holders {
		r.HolderLooks += len(hs)
	}
	r.StaleAccepted, probs[0] = checkStale(h)
	r.TokensRegressed, probs[1] = checkTokens(h)
	r.Overlaps, probs[2] = checkOverlaps(h)
	r.EarlyExpiry, r.EarlyWorst, r.Expiries, probs[9] = checkEarlyExpiry(h)
	r.LostWrites, probs[3] = checkLost(h)
	r.DoubleApplies, probs[4] = checkDouble(h)
	lin := checkLinear(h, outDir, linTimeout)
	r.Linearizable, r.LinearDetail, probs[5], r.Visualizations = lin.ok, lin.detail, lin.problems, lin.files
	if h.noReturn > 0 {
		r.LinearDetail += fmt.Sprintf(" (%d ops of a definite outcome had no valid return time: taken as returning at +inf)", h.noReturn)
	}
	r.MissingFinal, probs[6] = checkFinals(h)
	r.MissingFinal += len(sc.missing)
	probs[6] = append(probs[6], sc.missing...)
	r.RestoreMismatch, probs[10] = len(sc.problems), sc.problems
	r.Malformed, probs[7] = len(h.malformed), h.malformed
	r.StaleRefused = h.staleRefused
	if h.workerOps == 0 {
		r.Empty = true
		probs[8] = []string{fmt.Sprintf("empty history: no operation of any worker (%d ops in all): nothing was checked", len(ops))}
	}

	r.Problems = interleaveProblems(probs[:], maxProblems)
	return r
}

// interleave takes lines from each list in turn, up to max lines, and
// says how many it left out.
func interleaveProblems(lists [][]string, max int) []string {
	total := 0
	for _, l := range lists {
		total += len(l)
	}
	var out []string
	for i := 0; len(out) < max && len(out) < total; i++ {
		for _, l := range lists {
			if i < len(l) && len(out) < max {
				out = append(out, l[i])
			}
		}
	}
	if total > len(out) {
		out = append(out, fmt.Sprintf("... and %d more problems not shown", total-len(out)))
	}
	return out
}

// resKey names a register: one resource of one store.
type chkRes struct{ store, res string }

func (k chkRes) String() string { return k.store + ":" + k.res }

// mutation is one logical write or add: the ops of one worker operation,
// merged with every other op of the history that carries the same op_id on
// the same resource (a retry recorded as a separate op is the same
// mutation, applied at most once).
type chkMutation struct {
	Op              // the representative: the OK op that returned first, else the first op
	call   int64    // the earliest Call of the group
	oks    []*Op    // the group's OK ops
	ok     bool     // some op of the group got OK
	vers   []uint64 // distinct versions reported by the group's OK ops, first the representative's
	others []*Op    // for vers[1:]: the OK op that reported it
}

// history is the input, indexed for the checkers.
type chkHistory struct {
	muts         map[chkRes][]*chkMutation // OK and unknown mutations
	reads        map[chkRes][]*Op          // OK reads
	finals       map[chkRes][]*Op          // OK KindFinal ops
	acquires     []*Op                     // OK acquires
	releases     map[string][]*Op          // every release, by lock
	lockOps      map[string][]*Op          // OK acquires and OK releases, by lock (a set's: one for each of its locks)
	holders      map[string][]*Op          // OK looks at a lock's holders, by lock
	refusals     map[chkRes][]*Op          // fenced writes/adds refused as stale that quote the last token
	noReturn     int                       // ops of a definite outcome without a valid return time
	malformed    []string                  // one problem line per malformed record
	staleRefused int                       // fenced writes/adds refused as stale
	workerOps    int                       // ops of workers (not the harness)
	anyFinal     map[chkRes]*Op            // the last KindFinal op of each resource, of any outcome
	resources    []chkRes                  // sorted
	locks        []string                  // sorted
}

func newChkHistory(ops []Op) *chkHistory {
	h := &chkHistory{
		muts:     map[chkRes][]*chkMutation{},
		reads:    map[chkRes][]*Op{},
		finals:   map[chkRes][]*Op{},
		refusals: map[chkRes][]*Op{},
		anyFinal: map[chkRes]*Op{},
		releases: map[string][]*Op{},
		lockOps:  map[string][]*Op{},
		holders:  map[string][]*Op{},
	}
	type idKey struct {
		k  chkRes
		id string
	}
	byID := map[idKey]*chkMutation{}
	resSeen := map[chkRes]bool{}
	lockSeen := map[string]bool{}
	// pointers into ops (a long run's history is large), in SortOps order
	sorted := make([]*Op, len(ops))
	for i := range ops {
		sorted[i] = &ops[i]
		o := sorted[i]
		if o.Worker >= 0 {
			h.workerOps++
		}
		var c *Op // a corrected copy
		switch o.Kind {
		case KindAcquire, KindRelease, KindRead, KindWrite, KindAdd, KindFinal, KindHolders:
		default:
			h.malformedf("%s: unknown kind %q (%s): not checked", fmtOp(*o), o.Kind, fmtSpan(*o))
		}
		switch o.Out {
		case OutcomeOK, OutcomeStale, OutcomeFail:
			if o.Return == 0 || o.Return < o.Call {
				// a definite outcome without a return time: it
				// returned at some time after its call, the weakest
				// claim
				if o.Return == 0 {
					h.malformedf("%s %s: outcome %s without a return time (called %s): taken as returning at +inf",
						fmtOp(*o), o.Kind, o.Out, fmtClock(o.Call))
				} else {
					h.malformedf("%s %s: outcome %s returned %s, %v before its call %s: taken as returning at +inf",
						fmtOp(*o), o.Kind, o.Out, fmtClock(o.Return), time.Duration(o.Call-o.Return), fmtClock(o.Call))
				}
				c = new(Op)
				*c = *o
				c.Return = math.MaxInt64
				h.noReturn++
			}
		case OutcomeUnknown:
		default:
			h.malformedf("%s %s: unknown outcome %q (%s): taken as unknown", fmtOp(*o), o.Kind, o.Out, fmtSpan(*o))
			c = new(Op)
			*c = *o
			c.Out, c.Return = OutcomeUnknown, 0
		}
		if c != nil {
			sorted[i] = c
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Call != b.Call {
			return a.Call < b.Call
		}
		if a.Worker != b.Worker {
			return a.Worker < b.Worker
		}
		return a.N < b.N
	})
	// a set's acquire and release are one op for each of its locks (the
	// per-lock checkers see them as any other), the copies after the
	// first marked setCopy (the token checker counts the grant once)
	var expanded []*Op
	for _, op := range sorted {
		if (op.Kind != KindAcquire && op.Kind != KindRelease) || len(op.Set) == 0 {
			expanded = append(expanded, op)
			continue
		}
		for i, ref := range op.Set {
			c := new(Op)
			*c = *op
			c.Lock, c.Mode, c.Permits, c.setCopy = ref.Name, ref.Mode, ref.Permits, i > 0
			expanded = append(expanded, c)
		}
	}
	for _, op := range expanded {
		switch op.Kind {
		case KindHolders:
			lockSeen[op.Lock] = true
			if op.Out == OutcomeOK {
				h.holders[op.Lock] = append(h.holders[op.Lock], op)
			}
		case KindWrite, KindAdd:
			k := chkRes{op.Store, op.Res}
			resSeen[k] = true
			if op.Out == OutcomeStale {
				switch {
				case !op.Fenced:
					h.malformedf("%s %s: a plain (unfenced) %s refused as stale (%s): plain writes compare no token",
						fmtOp(*op), op.Kind, op.Kind, fmtSpan(*op))
				case op.LastToken > 0:
					h.staleRefused++
					h.refusals[k] = append(h.refusals[k], op)
				default:
					h.staleRefused++
				}
			}
			if op.Out != OutcomeOK && op.Out != OutcomeUnknown {
				continue // stale or fail: definitely not applied
			}
			m := byID[idKey{k, op.OpID}]
			if op.OpID == "" || m == nil {
				m = &chkMutation{Op: *op, call: op.Call}
				h.muts[k] = append(h.muts[k], m)
			}
			if op.Out == OutcomeOK {
				m.oks = append(m.oks, op)
			}
			if op.OpID != "" {
				byID[idKey{k, op.OpID}] = m
			}
		case KindRead:
			k := chkRes{op.Store, op.Res}
			resSeen[k] = true
			if op.Out == OutcomeOK {
				h.reads[k] = append(h.reads[k], op)
			}
		case KindFinal:
			k := chkRes{op.Store, op.Res}
			resSeen[k] = true
			if f := h.anyFinal[k]; f == nil || op.Call >= f.Call {
				h.anyFinal[k] = op
			}
			if op.Out == OutcomeOK {
				h.finals[k] = append(h.finals[k], op)
			}
		case KindAcquire:
			lockSeen[op.Lock] = true
			if op.Out == OutcomeOK {
				if !op.setCopy {
					h.acquires = append(h.acquires, op)
				}
				h.lockOps[op.Lock] = append(h.lockOps[op.Lock], op)
			}
		case KindRelease:
			lockSeen[op.Lock] = true
			h.releases[op.Lock] = append(h.releases[op.Lock], op)
			if op.Out == OutcomeOK {
				h.lockOps[op.Lock] = append(h.lockOps[op.Lock], op)
			}
		}
	}
	for _, ms := range h.muts {
		for _, m := range ms {
			m.finish()
		}
	}
	// every OK acquire needs its release record: checker 3 sees holds
	// only through them (a worker records one for every lease it got, lost
	// or not, also when stopped)
	released := map[lockTok]bool{}
	for l, rs := range h.releases {
		for _, o := range rs {
			released[lockTok{l, o.Token}] = true
		}
	}
	for _, a := range h.acquires {
		if !released[lockTok{a.Lock, a.Token}] {
			h.malformedf("hold without a release record: %s acquire of %s token %d (%s): checker 3 cannot see it",
				fmtOp(*a), a.Lock, a.Token, fmtSpan(*a))
		}
	}
	for k := range resSeen {
		h.resources = append(h.resources, k)
	}
	sort.Slice(h.resources, func(i, j int) bool { return h.resources[i].String() < h.resources[j].String() })
	for l := range lockSeen {
		h.locks = append(h.locks, l)
	}
	sort.Strings(h.locks)
	return h
}

type lockTok struct {
	lock  string
	token uint64
}

func (h *chkHistory) malformedf(format string, args ...any) {
	h.malformed = append(h.malformed, "malformed record: "+fmt.Sprintf(format, args...))
}

// finish picks the representative (the OK op that returned first) and the
// distinct versions of the group's OK ops.
func (m *chkMutation) finish() {
	if len(m.oks) == 0 {
		return
	}
	sort.SliceStable(m.oks, func(i, j int) bool { return m.oks[i].Return < m.oks[j].Return })
	m.Op, m.ok = *m.oks[0], true
	m.vers = []uint64{m.Version}
	for _, o := range m.oks[1:] {
		if !slices.Contains(m.vers, o.Version) {
			m.vers = append(m.vers, o.Version)
			m.others = append(m.others, o)
		}
	}
}

// okMuts returns the OK mutations of k sorted by version (then return).
func (h *chkHistory) okMuts(k chkRes) []*chkMutation {
	var ms []*chkMutation
	for _, m := range h.muts[k] {
		if m.ok {
			ms = append(ms, m)
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].Version != ms[j].Version {
			return ms[i].Version < ms[j].Version
		}
		return ms[i].Return < ms[j].Return
	})
	return ms
}

// lastFinal returns the last KindFinal op of k.
func (h *chkHistory) lastFinal(k chkRes) (*Op, bool) {
	fs := h.finals[k]
	if len(fs) == 0 {
		return nil, false
	}
	f := fs[0]
	for _, o := range fs[1:] {
		if o.Call >= f.Call {
			f = o
		}
	}
	return f, true
}

// ---- checker 1: no stale write accepted ----

// checkStale orders each resource's OK mutations by the version they
// report and counts those whose token is below the largest token of a
// lower version: a write the store accepted after a newer owner's. Plain
// (unfenced) writes count too: that is how the control run shows the
// hazard.
func checkStale(h *chkHistory) (int, []string) {
	n := 0
	var probs []string
	for _, k := range h.resources {
		var max *chkMutation
		for _, m := range h.okMuts(k) {
			if max != nil && m.Token < max.Token {
				n++
				probs = append(probs, fmt.Sprintf("stale write accepted on %s: %s %s token %d got version %d, after %s token %d version %d (%s)",
					k, fmtOp(m.Op), m.Kind, m.Token, m.Version, fmtOp(max.Op), max.Token, max.Version, fmtSpan(m.Op)))
				continue
			}
			if max == nil || m.Token > max.Token {
				max = m
			}
		}
	}
	return n, probs
}

// ---- checker 2: tokens unique and increasing ----

// checkTokens counts granted tokens that repeat an earlier grant's, or are
// not above the token of a grant that returned before they were called
// (tokens come from one counter: a grant that begins after another ended
// gets a larger token, on every lock and across restarts).
func checkTokens(h *chkHistory) (int, []string) {
	ckAcquire := h.acquires
	bad := map[int]bool{}
	var probs []string
	first := map[uint64]int{}
	for i, a := range ckAcquire {
		if j, ok := first[a.Token]; ok {
			bad[i] = true
			probs = append(probs, fmt.Sprintf("token %d granted twice: %s on %s (%s) and %s on %s (%s)",
				a.Token, fmtOp(*ckAcquire[j]), ckAcquire[j].Lock, fmtSpan(*ckAcquire[j]), fmtOp(*a), a.Lock, fmtSpan(*a)))
			continue
		}
		first[a.Token] = i
	}
	byCall := make([]int, len(ckAcquire))
	byRet := make([]int, len(ckAcquire))
	for i := range ckAcquire {
		byCall[i], byRet[i] = i, i
	}
	sort.SliceStable(byCall, func(i, j int) bool { return ckAcquire[byCall[i]].Call < ckAcquire[byCall[j]].Call })
	sort.SliceStable(byRet, func(i, j int) bool { return ckAcquire[byRet[i]].Return < ckAcquire[byRet[j]].Return })
	maxI, r := -1, 0
	for _, b := range byCall {
		for r < len(byRet) && ckAcquire[byRet[r]].Return < ckAcquire[b].Call {
			if a := byRet[r]; maxI < 0 || ckAcquire[a].Token > ckAcquire[maxI].Token {
				maxI = a
			}
			r++
		}
		if maxI >= 0 && ckAcquire[maxI].Token >= ckAcquire[b].Token && !bad[b] {
			bad[b] = true
			a := ckAcquire[maxI]
			probs = append(probs, fmt.Sprintf("token regressed: %s got token %d on %s (%s), after %s got token %d on %s (returned %s)",
				fmtOp(*ckAcquire[b]), ckAcquire[b].Token, ckAcquire[b].Lock, fmtSpan(*ckAcquire[b]), fmtOp(*a), a.Token, a.Lock, fmtClock(a.Return)))
		}
	}
	return len(bad), probs
}

// ---- checker 3: no overlapping holds, by mode ----

// checkOverlaps counts, per lock, holds ([HeldFrom, HeldUntil] of a release
// op; a set's release holds each of its locks) that begin before an
// earlier hold of another token ended when the two conflict: either is
// exclusive, or they name other permit counts (see conflicts). Shared
// holds overlap freely; permit holds of one count are checker 3c's. A
// look at the lock's holders (KindHolders) that lists an exclusive holder
// beside another counts too: the server said so itself.
func checkOverlaps(h *chkHistory) (int, []string) {
	n := 0
	var probs []string
	for _, l := range h.locks {
		var hs []*Op
		for _, o := range h.releases[l] {
			if o.HeldFrom > 0 && o.HeldUntil > o.HeldFrom {
				hs = append(hs, o)
			}
		}
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].HeldFrom < hs[j].HeldFrom })
		var active []*Op // earlier holds not ended when the current one begins
		for _, o := range hs {
			kept := active[:0]
			for _, a := range active {
				if a.HeldUntil > o.HeldFrom {
					kept = append(kept, a)
				}
			}
			active = kept
			for _, a := range active {
				if a.Token != o.Token && conflicts(a, o) {
					n++
					probs = append(probs, fmt.Sprintf("overlap on lock %s: token %d (%s) held %s–%s (%s), token %d (%s) held %s–%s (%s)",
						l, a.Token, fmtOp(*a), fmtClock(a.HeldFrom), fmtClock(a.HeldUntil), holdKind(a),
						o.Token, fmtOp(*o), fmtClock(o.HeldFrom), fmtClock(o.HeldUntil), holdKind(o)))
					break
				}
			}
			active = append(active, o)
		}
		for _, o := range h.holders[l] {
			for i := range o.Holders {
				a := &o.Holders[i]
				if a.Mode == ModeShared || len(o.Holders) < 2 || o.Permits > 0 {
					continue
				}
				n++
				probs = append(probs, fmt.Sprintf("overlap on lock %s: %s saw exclusive token %d among %d holders %s (%s)",
					l, fmtOp(*o), a.Token, len(o.Holders), fmtHolders(o.Holders), fmtSpan(*o)))
				break
			}
		}
	}
	return n, probs
}

// holdKind names how o holds its lock.
func holdKind(o *Op) string {
	var s string
	switch {
	case o.Permits > 0:
		s = fmt.Sprintf("permit of %d", o.Permits)
	case o.Mode == ModeShared:
		s = "shared"
	default:
		s = "exclusive"
	}
	if len(o.Set) > 0 {
		s += fmt.Sprintf(", set of %d", len(o.Set))
	}
	return s
}

func fmtHolders(hs []LockRef) string {
	parts := make([]string, len(hs))
	for i, x := range hs {
		parts[i] = strconv.FormatUint(x.Token, 10)
		if x.Mode == ModeShared {
			parts[i] += " shared"
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// ---- checker 3c: at most N permit holders ----

// checkPermits counts, per lock, permit holds that begin while the lock's
// count of other permit holds (of other tokens) is already held, and looks
// at the lock's holders that list more holders than its count.
func checkPermits(h *chkHistory) (int, []string) {
	n := 0
	var probs []string
	for _, l := range h.locks {
		var hs []*Op
		for _, o := range h.releases[l] {
			if o.Permits > 0 && o.HeldFrom > 0 && o.HeldUntil > o.HeldFrom {
				hs = append(hs, o)
			}
		}
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].HeldFrom < hs[j].HeldFrom })
		var active []*Op
		for _, o := range hs {
			kept := active[:0]
			for _, a := range active {
				if a.HeldUntil > o.HeldFrom {
					kept = append(kept, a)
				}
			}
			active = kept
			others := map[uint64]bool{}
			for _, a := range active {
				if a.Token != o.Token && a.Permits == o.Permits {
					others[a.Token] = true
				}
			}
			if len(others) >= int(o.Permits) {
				n++
				toks := make([]uint64, 0, len(others))
				for t := range others {
					toks = append(toks, t)
				}
				slices.Sort(toks)
				probs = append(probs, fmt.Sprintf("permits exceeded on lock %s: token %d (%s) held %s–%s beside %d other holders %v of its %d permits",
					l, o.Token, fmtOp(*o), fmtClock(o.HeldFrom), fmtClock(o.HeldUntil), len(toks), toks, o.Permits))
			}
			active = append(active, o)
		}
		for _, o := range h.holders[l] {
			if o.Permits > 0 && len(o.Holders) > int(o.Permits) {
				n++
				probs = append(probs, fmt.Sprintf("permits exceeded on lock %s: %s saw %d holders %s of its %d permits (%s)",
					l, fmtOp(*o), len(o.Holders), fmtHolders(o.Holders), o.Permits, fmtSpan(*o)))
			}
		}
	}
	return n, probs
}

// ---- checker 3d: a set is held whole ----

// checkSets counts sets not held whole. At the grant: the lease must list
// exactly the set's locks (names and modes) and carry, for each, a proof of
// its own token (a grant lost before the worker saw its lease, recorded ok
// with its error, lists nothing and is not judged there). After it ends: no look at the holders of one of its locks
// may list its token once the set has ended on any lock — its release
// returned OK (by whichever name), or a grant that conflicts with its hold
// of one lock (a later token, either of them exclusive) returned; its
// locks end together. A look after a restore's cut (cuts) that came after
// the set's end is not judged: the restored state may be from before it.
func checkSets(h *chkHistory, cuts []int64) (int, []string) {
	n := 0
	var probs []string
	type setEnd struct {
		at  int64 // the earliest time the set is known to have ended (0: none)
		why string
	}
	sets := map[uint64]*Op{} // a set's OK grant, by token
	for _, a := range h.acquires {
		if len(a.Set) == 0 {
			continue
		}
		sets[a.Token] = a
		if a.Err != "" {
			// granted, but lost before the worker could use it (the
			// client's LostError): the worker never saw the lease
			continue
		}
		bad := len(a.Granted) != len(a.Set)
		for i := 0; !bad && i < len(a.Set); i++ {
			g, s := a.Granted[i], a.Set[i]
			bad = g.Name != s.Name || g.Mode != s.Mode || g.Permits != s.Permits || g.Proof != a.Token
		}
		if bad {
			n++
			probs = append(probs, fmt.Sprintf("set not granted whole: %s asked for %s, token %d; the lease lists %s (%s)",
				fmtOp(*a), fmtSet(a.Set, 0), a.Token, fmtSet(a.Granted, a.Token), fmtSpan(*a)))
		}
	}
	if len(sets) == 0 {
		return n, probs
	}
	ends := map[uint64]setEnd{}
	end := func(tok uint64, at int64, why string) {
		if e, ok := ends[tok]; !ok || at < e.at {
			ends[tok] = setEnd{at, why}
		}
	}
	for _, l := range h.locks {
		for _, r := range h.releases[l] {
			if sets[r.Token] != nil && r.Out == OutcomeOK && !r.setCopy && r.Return != math.MaxInt64 {
				end(r.Token, r.Return, fmt.Sprintf("its release by %s (%s) returned %s", r.Lock, fmtOp(*r), fmtClock(r.Return)))
			}
		}
		// the set's hold of l ends by the first conflicting later grant
		var grants []*Op
		for _, o := range h.lockOps[l] {
			if o.Kind == KindAcquire && o.Return != math.MaxInt64 {
				grants = append(grants, o)
			}
		}
		for _, s := range grants {
			if sets[s.Token] == nil {
				continue
			}
			for _, g := range grants {
				if g.Token > s.Token && conflicts(s, g) {
					end(s.Token, g.Return, fmt.Sprintf("token %d (%s, %s) was granted %s on %s", g.Token, fmtOp(*g), holdKind(g), fmtClock(g.Return), l))
				}
			}
		}
	}
	for _, l := range h.locks {
		for _, o := range h.holders[l] {
			for _, x := range o.Holders {
				e, ok := ends[x.Token]
				if !ok || sets[x.Token] == nil || o.Call <= e.at || slices.ContainsFunc(cuts, func(c int64) bool { return c > e.at && c <= o.Call }) {
					continue
				}
				n++
				probs = append(probs, fmt.Sprintf("set not held whole: %s saw set token %d (%s) holding %s at %s, after the set ended: %s",
					fmtOp(*o), x.Token, fmtOp(*sets[x.Token]), l, fmtClock(o.Call), e.why))
			}
		}
	}
	return n, probs
}

func fmtSet(refs []LockRef, token uint64) string {
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = r.Name
		if r.Mode != "" {
			parts[i] += " " + r.Mode
		}
		if r.Permits > 0 {
			parts[i] += fmt.Sprintf(" permits %d", r.Permits)
		}
		if token != 0 && r.Proof != token {
			parts[i] += fmt.Sprintf(" (proof of token %d)", r.Proof)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// ---- checker 3b: no lease ends before its TTL ----

// checkEarlyExpiry counts leases the server ended before their safe
// deadline. A lock is granted to one lease at a time, in token order: when
// a later token of the same lock was granted (its acquire returned at
// RetMono), every earlier lease of that lock had ended by then — released,
// or expired. A lease whose release was called after that grant returned
// was not ended by its release, so it expired (or its session did), and it
// must have lived to its DeadlineMono: the send time of its last successful
// grant or renew plus the remaining TTL the server reported, less the
// documented drift (1%), all on CLOCK_MONOTONIC, the one clock every
// process of the host shares and no test clock offset or rate moves. A
// leader whose clock runs fast beyond the drift (FENCE_TEST_CLOCK_RATE),
// or a new leader that takes a base from the wrong place, shows here as a
// later grant returning before the earlier lease's deadline. Unlike checker
// 3 (holds as the workers saw them, wall clock), it needs no hold of the
// second lease: a grant lost before its reply still bounds the earlier
// lease's end. Records without monotonic times (an older history) are
// skipped.
func checkEarlyExpiry(h *chkHistory) (int, time.Duration, int, []string) {
	n, judged := 0, 0
	var worst time.Duration
	var probs []string
	for _, l := range h.locks {
		var grants []*Op
		for _, o := range h.lockOps[l] {
			if o.Kind == KindAcquire && o.RetMono > 0 && o.Return != math.MaxInt64 {
				grants = append(grants, o)
			}
		}
		rels := map[uint64]*Op{}
		for _, o := range h.releases[l] {
			if o.DeadlineMono > 0 && o.CallMono > 0 {
				rels[o.Token] = o
			}
		}
		// tokens descending: first[c] is the earliest return among the
		// grants of a larger token than the one looked at, of class c
		// (permits, exclusive); a lease is bounded by the classes that
		// conflict with it (a shared lease by no later shared grant)
		sort.SliceStable(grants, func(i, j int) bool { return grants[i].Token > grants[j].Token })
		type class struct {
			permits uint32
			excl    bool
		}
		first := map[class]*Op{}
		var group []*Op // the grants of g's own token
		for i, g := range grants {
			if i > 0 && g.Token != grants[i-1].Token {
				for _, x := range group {
					c := class{x.Permits, x.exclusive()}
					if f := first[c]; f == nil || x.RetMono < f.RetMono {
						first[c] = x
					}
				}
				group = group[:0]
			}
			group = append(group, g)
			var bound *Op
			for _, f := range first {
				if conflicts(g, f) && (bound == nil || f.RetMono < bound.RetMono) {
					bound = f
				}
			}
			r := rels[g.Token]
			if bound != nil && r != nil && r.CallMono > bound.RetMono {
				judged++
			}
			if bound != nil && r != nil && r.CallMono > bound.RetMono && bound.RetMono < r.DeadlineMono {
				n++
				short := time.Duration(r.DeadlineMono - bound.RetMono)
				worst = max(worst, short)
				probs = append(probs, fmt.Sprintf("early expiry on lock %s: token %d (%s, %s) was not released before token %d was granted (%s, returned %s), %s before its safe deadline (its release was called %s after that grant)",
					l, g.Token, fmtOp(*g), leaseKind(g), bound.Token, fmtOp(*bound), fmtClock(bound.Return),
					roundDur(short, time.Microsecond), roundDur(time.Duration(r.CallMono-bound.RetMono), time.Millisecond)))
			}
		}
	}
	return n, worst, judged, probs
}

// roundDur rounds d to m, unless d is shorter than m.
func roundDur(d, m time.Duration) time.Duration {
	if d < m {
		return d
	}
	return d.Round(m)
}

func leaseKind(o *Op) string {
	if o.Session {
		return "session lease"
	}
	return "standalone lease"
}

// ---- checker 4: no acknowledged write lost ----

// checkLost compares each resource's final state with its OK mutations:
// the final version counts at least one apply per OK mutation, no OK
// mutation reports a version above it, and the final last token is at least
// every OK fenced mutation's token. (That the final value is explained by
// the mutations is checker 6: the final read is in its register history.)
func checkLost(h *chkHistory) (int, []string) {
	n := 0
	var probs []string
	for _, k := range h.resources {
		ms := h.okMuts(k)
		f, ok := h.lastFinal(k)
		if !ok {
			continue // checkFinals says so
		}
		flagged := 0
		for _, m := range ms {
			switch {
			case m.Version > f.Version:
				flagged++
				probs = append(probs, fmt.Sprintf("lost write on %s: %s %s token %d acknowledged version %d (%s), final version is %d",
					k, fmtOp(m.Op), m.Kind, m.Token, m.Version, fmtSpan(m.Op), f.Version))
			case m.Fenced && m.Token > f.LastToken:
				flagged++
				probs = append(probs, fmt.Sprintf("lost write on %s: %s %s token %d acknowledged version %d (%s), final last token is %d",
					k, fmtOp(m.Op), m.Kind, m.Token, m.Version, fmtSpan(m.Op), f.LastToken))
			}
		}
		lost := flagged
		if short := len(ms) - int(f.Version); short > 0 {
			if short > lost {
				lost = short
			}
			probs = append(probs, fmt.Sprintf("lost writes on %s: %d mutations acknowledged, final version %d (final read %s)",
				k, len(ms), f.Version, fmtClock(f.Call)))
		}
		n += lost
	}
	return n, probs
}

// ---- the final reads that checkers 4 and 5 need ----

// checkFinals counts the resources some op touched that have no OK final
// read: their acknowledged mutations are not checked for loss, nor their
// applies counted.
func checkFinals(h *chkHistory) (int, []string) {
	n := 0
	var probs []string
	for _, k := range h.resources {
		if _, ok := h.lastFinal(k); ok {
			continue
		}
		n++
		why := "no final read of " + k.String()
		if f := h.anyFinal[k]; f != nil {
			why = fmt.Sprintf("final read of %s not ok (%s %s, out %s%s)", k, fmtOp(*f), fmtSpan(*f), f.Out, errSuffix(f.Err))
		}
		ack := 0
		for _, m := range h.muts[k] {
			if m.ok {
				ack++
			}
		}
		probs = append(probs, fmt.Sprintf("%s: its %d acknowledged and %d unknown mutations are not checked for loss or double applies",
			why, ack, len(h.muts[k])-ack))
	}
	return n, probs
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + e
}

// ---- checker 5: nothing applied twice ----

// checkDouble counts applies the history cannot account for: an op_id
// acknowledged with two versions, two different OK mutations reporting the
// same version, and a final version above what the OK mutations (their
// distinct versions) and the unknown ones (one apply each at most) allow.
// A replayed result carries its original's version and is not counted.
func checkDouble(h *chkHistory) (int, []string) {
	n := 0
	var probs []string
	for _, k := range h.resources {
		claimed := map[uint64]*chkMutation{}
		nClaimed, unknown := 0, 0
		for _, m := range h.muts[k] {
			if !m.ok {
				unknown++
				continue
			}
			for _, o := range m.others {
				n++
				probs = append(probs, fmt.Sprintf("double apply on %s: op_id %q acknowledged as version %d (%s, %s) and as version %d (%s, %s)",
					k, m.OpID, m.Version, fmtOp(m.Op), fmtSpan(m.Op), o.Version, fmtOp(*o), fmtSpan(*o)))
			}
			for i, v := range m.vers {
				op := &m.Op
				if i > 0 {
					op = m.others[i-1]
				}
				if prev := claimed[v]; prev != nil {
					n++
					probs = append(probs, fmt.Sprintf("version %d of %s reported by two mutations: %s %s token %d (%s) and %s %s token %d (%s)",
						v, k, fmtOp(prev.Op), prev.Kind, prev.Token, fmtSpan(prev.Op), fmtOp(*op), op.Kind, op.Token, fmtSpan(*op)))
					continue
				}
				claimed[v] = m
				nClaimed++
			}
		}
		f, ok := h.lastFinal(k)
		if !ok {
			continue
		}
		if extra := int(f.Version) - nClaimed - unknown; extra > 0 {
			n += extra
			probs = append(probs, fmt.Sprintf("double apply on %s: final version %d, but only %d acknowledged versions and %d unknown mutations (final read %s)",
				k, f.Version, nClaimed, unknown, fmtClock(f.Call)))
		}
	}
	return n, probs
}

// ---- formatting ----

func fmtOp(o Op) string {
	if o.Worker < 0 {
		return fmt.Sprintf("harness#%d", o.N)
	}
	return fmt.Sprintf("w%d#%d", o.Worker, o.N)
}

// clock renders a Unix-nanosecond time as UTC time of day.
func fmtClock(ns int64) string {
	if ns == 0 {
		return "?"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000000")
}

// span renders an op's call and return.
func fmtSpan(o Op) string {
	var b strings.Builder
	b.WriteString(fmtClock(o.Call))
	b.WriteString("→")
	if o.Out == OutcomeUnknown || o.Return == 0 {
		b.WriteString("unknown")
	} else {
		b.WriteString(fmtClock(o.Return))
	}
	return b.String()
}
