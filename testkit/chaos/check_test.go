package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sim generates histories of the paused-worker story's workload against a model of the
// server that is correct unless a bug knob is set: workers acquire a lock,
// read, write value-1, sometimes add +5 with an op_id, and release; faults
// make outcomes unknown and leases expire under paused workers. Time is in
// abstract units (nanoseconds for the checkers).
type ckSimConfig struct {
	seed     uint64
	workers  int
	locks    int
	stores   []string
	ops      int     // stop after about this many ops
	unknownP float64 // probability that an op's outcome is unknown
	pauseP   float64 // probability that a holder is paused past its lease
	tryP     float64 // probability of a try-acquire (fails when held)
	control  bool    // plain writes (no token compare)

	// bugs, each with its probability per chance
	bugStaleAccept float64 // a fenced write with an old token is accepted
	bugTokenReuse  float64 // a grant repeats the previous token
	bugTokenBack   float64 // the token counter goes back (a restart that lost it)
	bugGrantHeld   float64 // a grant while the lock is held by a live lease
	bugLostWrite   float64 // a write acknowledged and not applied
	bugDoubleAdd   float64 // an add applied twice (its op_id forgotten on retry)
	bugStaleRead   float64 // a read returns the state before the last mutation
	// bugEarlyExpiry: a paused holder's lease ends this long before the
	// deadline its worker records (a fast leader clock)
	bugEarlyExpiry int64
}

type ckSimReg struct {
	value     int64
	last      uint64
	version   uint64
	prev      ckSimSnap
	appliedBy string // op_id of the last mutation
}

type ckSimSnap struct {
	value   int64
	last    uint64
	version uint64
}

type ckSimWorker struct {
	busy    int64 // free from this time
	n       int
	holding bool
	lock    int
	token   uint64
	from    int64 // the acquire's return
	lostAt  int64 // when the lease was lost (0: not lost)
	store   string
	script  []Kind
	read    int64
}

type ckSim struct {
	cfg     ckSimConfig
	rng     *rand.Rand
	now     int64
	tok     uint64
	holder  []uint64
	expires []int64 // when an abandoned holder's lease ends
	regs    map[chkRes]*ckSimReg
	ws      []ckSimWorker
	ops     []Op
	opids   int
}

const ckSimTTL = 400

func ckResName(store string, k int) string {
	if store == StoreFence {
		return fmt.Sprintf("stock/sku-%d", k)
	}
	return fmt.Sprintf("sku-%d", k)
}

func ckSimulate(cfg ckSimConfig) []Op {
	if cfg.workers == 0 {
		cfg.workers = 4
	}
	if cfg.locks == 0 {
		cfg.locks = 3
	}
	if cfg.stores == nil {
		cfg.stores = []string{StoreFence, StorePostgres}
	}
	s := &ckSim{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.seed, 7)),
		now:     1_000_000,
		holder:  make([]uint64, cfg.locks),
		expires: make([]int64, cfg.locks),
		regs:    map[chkRes]*ckSimReg{},
		ws:      make([]ckSimWorker, cfg.workers),
	}
	for _, st := range cfg.stores {
		for k := 0; k < cfg.locks; k++ {
			r := &ckSimReg{}
			s.regs[chkRes{st, ckResName(st, k)}] = r
		}
	}
	for len(s.ops) < cfg.ops {
		s.now += 1 + int64(s.rng.IntN(4))
		w := s.rng.IntN(cfg.workers)
		if s.ws[w].busy > s.now {
			continue
		}
		s.step(w)
	}
	// every worker stops, releasing the lease it holds (as a worker
	// does on SIGTERM); the harness reads every resource
	for w := range s.ws {
		if s.ws[w].holding {
			s.now = max(s.now, s.ws[w].busy) + 1
			s.release(w)
		}
	}
	s.now += 10 * ckSimTTL
	for _, st := range cfg.stores {
		for k := 0; k < cfg.locks; k++ {
			name := ckResName(st, k)
			r := s.regs[chkRes{st, name}]
			s.now += 5
			s.ops = append(s.ops, Op{Worker: -1, N: len(s.ops), Kind: KindFinal, Store: st, Res: name,
				Call: s.now, Return: s.now + 2, Out: OutcomeOK, ResValue: r.value, LastToken: r.last, Version: r.version})
		}
	}
	return s.ops
}

func (s *ckSim) chance(p float64) bool { return p > 0 && s.rng.Float64() < p }

// begin makes the op of worker w applied at s.now: Call before, Return after.
func (s *ckSim) begin(w int, kind Kind) Op {
	ws := &s.ws[w]
	ws.n++
	call := max(ws.busy, s.now-int64(s.rng.IntN(20)))
	return Op{Worker: w, N: ws.n, Kind: kind, Call: call, Out: OutcomeOK}
}

func (s *ckSim) end(w int, op Op) {
	ws := &s.ws[w]
	if op.Out == OutcomeUnknown {
		op.Return = 0
		ws.busy = s.now + 30 + int64(s.rng.IntN(30)) // the worker gave up on it
	} else {
		op.Return = s.now + 1 + int64(s.rng.IntN(20))
		ws.busy = op.Return + 1
	}
	if op.Kind == KindAcquire || op.Kind == KindRelease {
		// one clock in the sim: the monotonic readings are the wall ones
		op.CallMono, op.RetMono = op.Call, op.Return
	}
	s.ops = append(s.ops, op)
}

func (s *ckSim) step(w int) {
	ws := &s.ws[w]
	if !ws.holding {
		s.acquire(w)
		return
	}
	// a pause: the lease runs out while the worker sleeps
	if ws.lostAt == 0 && s.chance(s.cfg.pauseP) {
		ws.lostAt = s.now
		if s.holder[ws.lock] == ws.token {
			s.holder[ws.lock] = 0
		}
		ws.busy = s.now + ckSimTTL
		return
	}
	kind := ws.script[0]
	ws.script = ws.script[1:]
	switch kind {
	case KindRead:
		s.read(w)
	case KindWrite, KindAdd:
		s.mutate(w, kind)
	case KindRelease:
		s.release(w)
	}
}

func (s *ckSim) acquire(w int) {
	ws := &s.ws[w]
	k := s.rng.IntN(s.cfg.locks)
	if s.holder[k] != 0 && s.expires[k] != 0 && s.now >= s.expires[k] {
		s.holder[k], s.expires[k] = 0, 0 // an abandoned lease expired
	}
	op := s.begin(w, KindAcquire)
	op.Lock = fmt.Sprintf("sku-%d", k)
	op.Session = s.rng.IntN(2) == 0
	held := s.holder[k] != 0
	if held && s.chance(s.cfg.bugGrantHeld) {
		held = false
	}
	if held {
		if !s.chance(s.cfg.tryP) {
			ws.n-- // a blocking acquire: try again later
			return
		}
		op.Out, op.Err = OutcomeFail, "busy"
		s.end(w, op)
		return
	}
	switch {
	case s.tok > 3 && s.chance(s.cfg.bugTokenReuse):
	case s.tok > 10 && s.chance(s.cfg.bugTokenBack):
		s.tok -= 5
		s.tok++
	default:
		s.tok++
	}
	s.holder[k] = s.tok
	op.Token = s.tok
	if s.chance(s.cfg.unknownP) {
		// granted, but the reply was lost: the lease is abandoned
		s.expires[k] = s.now + ckSimTTL
		op.Token, op.Out = 0, OutcomeUnknown
		s.end(w, op)
		return
	}
	s.expires[k] = 0
	s.end(w, op)
	st := s.cfg.stores[s.rng.IntN(len(s.cfg.stores))]
	script := []Kind{KindRead, KindWrite}
	if s.rng.IntN(3) == 0 {
		script = append(script, KindAdd)
	}
	script = append(script, KindRelease)
	*ws = ckSimWorker{busy: ws.busy, n: ws.n, holding: true, lock: k, token: op.Token, from: s.ops[len(s.ops)-1].Return, store: st, script: script}
}

func (s *ckSim) reg(w int) (*ckSimReg, chkRes) {
	ws := &s.ws[w]
	k := chkRes{ws.store, ckResName(ws.store, ws.lock)}
	return s.regs[k], k
}

func (s *ckSim) read(w int) {
	r, k := s.reg(w)
	op := s.begin(w, KindRead)
	op.Store, op.Res = k.store, k.res
	if s.chance(s.cfg.unknownP) {
		op.Out = OutcomeUnknown
		s.end(w, op)
		s.ws[w].read = r.value
		return
	}
	op.ResValue, op.LastToken, op.Version = r.value, r.last, r.version
	if r.version > 0 && s.chance(s.cfg.bugStaleRead) {
		op.ResValue, op.LastToken, op.Version = r.prev.value, r.prev.last, r.prev.version
	}
	s.ws[w].read = op.ResValue
	s.end(w, op)
}

func (s *ckSim) apply(r *ckSimReg, op Op) {
	kind, token, v, fenced := op.Kind, op.Token, op.Value, op.Fenced
	r.prev = ckSimSnap{r.value, r.last, r.version}
	r.appliedBy = op.OpID
	r.version++
	if kind == KindAdd {
		r.value += v
	} else {
		r.value = v
	}
	if fenced {
		r.last = token
	}
}

func (s *ckSim) mutate(w int, kind Kind) {
	ws := &s.ws[w]
	r, k := s.reg(w)
	op := s.begin(w, kind)
	op.Store, op.Res, op.Token, op.Fenced = k.store, k.res, ws.token, !s.cfg.control
	if kind == KindAdd {
		op.Value = 5
		s.opids++
		op.OpID = fmt.Sprintf("op-%d", s.opids)
	} else {
		op.Value = ws.read - 1
	}
	allowed := !op.Fenced || op.Token >= r.last
	if !allowed && s.chance(s.cfg.bugStaleAccept) {
		allowed = true
	}
	unknown := s.chance(s.cfg.unknownP)
	switch {
	case unknown:
		// the request may or may not have reached the store
		if allowed && s.rng.IntN(2) == 0 {
			s.apply(r, op)
		}
		op.Out = OutcomeUnknown
		s.end(w, op)
		if kind == KindAdd && s.rng.IntN(2) == 0 {
			// the worker recorded the attempt and retries the same
			// op_id as a new op, which finds it applied or applies it
			s.retryAdd(w, op, r)
		}
		return
	case !allowed:
		op.Out, op.LastToken, op.Err = OutcomeStale, r.last, "stale token"
		s.end(w, op)
		return
	}
	if kind == KindAdd && s.chance(s.cfg.bugDoubleAdd) {
		s.apply(r, op) // the lost first attempt
		s.now += 5
	}
	if kind == KindWrite && s.chance(s.cfg.bugLostWrite) {
		op.Version, op.LastToken = r.version+1, op.Token
		s.end(w, op)
		return
	}
	s.apply(r, op)
	op.Version, op.LastToken, op.ResValue = r.version, r.last, 0
	if kind == KindAdd {
		op.ResValue = r.value
		if s.rng.IntN(4) == 0 {
			// the reply of the first attempt was lost; a retry got
			// the saved result much later
			op.Replayed = true
			s.now += 50
		}
	}
	s.end(w, op)
}

// retryAdd records a retry of an unknown add with the same op_id as a new
// op: a replay of the earlier apply if there was one, else a fresh apply.
func (s *ckSim) retryAdd(w int, first Op, r *ckSimReg) {
	s.now = max(s.now, s.ws[w].busy) + 1
	op := s.begin(w, KindAdd)
	op.Store, op.Res, op.Token, op.Fenced, op.Value, op.OpID = first.Store, first.Res, first.Token, first.Fenced, first.Value, first.OpID
	if r.appliedBy == first.OpID {
		op.Replayed, op.Version, op.ResValue, op.LastToken = true, r.version, r.value, r.last
		s.end(w, op)
		return
	}
	if op.Fenced && op.Token < r.last {
		op.Out, op.LastToken = OutcomeStale, r.last
		s.end(w, op)
		return
	}
	s.apply(r, op)
	op.Version, op.ResValue, op.LastToken = r.version, r.value, r.last
	s.end(w, op)
}

func (s *ckSim) release(w int) {
	ws := &s.ws[w]
	op := s.begin(w, KindRelease)
	op.Lock, op.Token, op.HeldFrom = fmt.Sprintf("sku-%d", ws.lock), ws.token, ws.from
	op.HeldUntil = op.Call
	// a held lease is renewed up to its release; a paused holder's ran
	// out at lostAt, its safe deadline
	op.DeadlineMono = op.Call + ckSimTTL
	if ws.lostAt != 0 {
		op.HeldUntil = min(op.HeldUntil, ws.lostAt)
		op.DeadlineMono = ws.lostAt + s.cfg.bugEarlyExpiry
	}
	switch {
	case s.holder[ws.lock] != ws.token:
		op.Out, op.Err = OutcomeStale, "not held"
	case s.chance(s.cfg.unknownP):
		op.Out = OutcomeUnknown
		if s.rng.IntN(2) == 0 {
			s.holder[ws.lock] = 0
		} else {
			s.expires[ws.lock] = s.now + ckSimTTL
		}
	default:
		s.holder[ws.lock] = 0
	}
	s.end(w, op)
	*ws = ckSimWorker{busy: ws.busy, n: ws.n}
}

// ---- tests ----

func ckMustOK(t *testing.T, r Report) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("clean history flagged: %+v\n%s", r, strings.Join(r.Problems, "\n"))
	}
}

func ckCount(ops []Op, f func(Op) bool) int {
	n := 0
	for _, o := range ops {
		if f(o) {
			n++
		}
	}
	return n
}

func TestCheckCleanHistories(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		ops := ckSimulate(ckSimConfig{seed: seed, ops: 2000, tryP: 0.3})
		r := Check(ops, t.TempDir(), 0)
		ckMustOK(t, r)
		if r.Ops != len(ops) || len(r.Problems) != 0 || len(r.Visualizations) != 0 {
			t.Fatalf("seed %d: %+v", seed, r)
		}
	}
}

// Unknown outcomes (applied or not), abandoned grants, paused holders whose
// stale writes are refused or (no newer write yet) accepted, retries of an
// op_id recorded as separate ops and replayed results: no false alarm.
func TestCheckUnknownOpsNoFalseAlarm(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		ops := ckSimulate(ckSimConfig{seed: seed, ops: 1500, unknownP: 0.15, pauseP: 0.1, tryP: 0.2})
		unknown := ckCount(ops, func(o Op) bool { return o.Out == OutcomeUnknown })
		stale := ckCount(ops, func(o Op) bool { return o.Out == OutcomeStale && o.Kind != KindRelease })
		replayed := ckCount(ops, func(o Op) bool { return o.Replayed })
		if unknown < 50 || stale == 0 || replayed == 0 {
			t.Fatalf("seed %d: the history lacks what it should test: %d unknown, %d stale writes, %d replayed", seed, unknown, stale, replayed)
		}
		ckMustOK(t, Check(ops, t.TempDir(), 0))
	}
}

// planted runs the simulator with a bug over a few seeds and returns the
// reports.
func ckPlanted(t *testing.T, cfg ckSimConfig, seeds int) []Report {
	t.Helper()
	var rs []Report
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg.seed = seed
		if cfg.ops == 0 {
			cfg.ops = 1500
		}
		rs = append(rs, Check(ckSimulate(cfg), t.TempDir(), 0))
	}
	return rs
}

func TestCheckPlantedStaleAccept(t *testing.T) {
	for _, r := range ckPlanted(t, ckSimConfig{pauseP: 0.2, bugStaleAccept: 1}, 5) {
		if r.StaleAccepted == 0 || r.Linearizable {
			t.Fatalf("stale writes accepted, not flagged: %+v", r)
		}
		if r.TokensRegressed != 0 || r.Overlaps != 0 || r.DoubleApplies != 0 {
			t.Fatalf("other checkers flagged: %+v", r)
		}
		if !strings.Contains(strings.Join(r.Problems, "\n"), "stale write accepted on ") {
			t.Fatalf("no problem line: %q", r.Problems)
		}
	}
}

// The control run: plain writes, so a paused holder's write lands after a
// newer owner's. Checker 1 must catch it; nothing else is wrong.
func TestCheckControlRunCaught(t *testing.T) {
	caught := 0
	for _, r := range ckPlanted(t, ckSimConfig{pauseP: 0.2, unknownP: 0.05, control: true, stores: []string{StorePostgres}}, 5) {
		if r.TokensRegressed != 0 || r.Overlaps != 0 || r.LostWrites != 0 || r.DoubleApplies != 0 || !r.Linearizable {
			t.Fatalf("control run: a checker other than 1 flagged it: %+v\n%s", r, strings.Join(r.Problems, "\n"))
		}
		if r.StaleAccepted > 0 {
			caught++
		}
	}
	if caught != 5 {
		t.Fatalf("control run caught in %d of 5 histories", caught)
	}
}

func TestCheckPlantedTokens(t *testing.T) {
	for name, cfg := range map[string]ckSimConfig{
		"reuse":  {bugTokenReuse: 0.05},
		"backup": {bugTokenBack: 0.02},
	} {
		for _, r := range ckPlanted(t, cfg, 3) {
			if r.TokensRegressed == 0 {
				t.Fatalf("%s: tokens not flagged: %+v", name, r)
			}
			if r.Overlaps != 0 {
				t.Fatalf("%s: overlaps: %+v", name, r)
			}
		}
	}
}

func TestCheckPlantedGrantHeld(t *testing.T) {
	for _, r := range ckPlanted(t, ckSimConfig{bugGrantHeld: 0.3}, 3) {
		if r.Overlaps == 0 {
			t.Fatalf("grant while held not flagged: %+v", r)
		}
		if r.TokensRegressed != 0 {
			t.Fatalf("tokens flagged: %+v", r)
		}
	}
}

// A paused holder's lease that the server ends before the deadline its
// worker recorded (a leader clock running fast) is flagged by the
// early-expiry checker, and by nothing that needs a second hold.
func TestCheckPlantedEarlyExpiry(t *testing.T) {
	for _, r := range ckPlanted(t, ckSimConfig{pauseP: 0.2, bugEarlyExpiry: ckSimTTL / 2}, 5) {
		if r.EarlyExpiry == 0 || r.EarlyWorst <= 0 || r.EarlyWorst > ckSimTTL/2 {
			t.Fatalf("early expiry not flagged: %+v", r)
		}
		if r.TokensRegressed != 0 || r.LostWrites != 0 || r.DoubleApplies != 0 {
			t.Fatalf("other checkers flagged: %+v", r)
		}
		if !strings.Contains(strings.Join(r.Problems, "\n"), "early expiry on lock ") {
			t.Fatalf("no problem line: %q", r.Problems)
		}
	}
	// the same pauses, leases ending at their deadline: nothing
	for _, r := range ckPlanted(t, ckSimConfig{pauseP: 0.2}, 5) {
		ckMustOK(t, r)
	}
}

func TestCheckEarlyExpiryExact(t *testing.T) {
	acq := func(w int, tok uint64, call, ret int64) Op {
		o := ckAcquire(w, "sku-0", tok, call, ret)
		o.CallMono, o.RetMono = call+1000, ret+1000 // the monotonic clock has its own origin
		return o
	}
	rel := func(w int, tok uint64, from, call, deadline int64) Op {
		o := ckRelease(w, "sku-0", tok, from, min(call, deadline), call, call+5)
		o.CallMono, o.DeadlineMono = call+1000, deadline+1000
		return o
	}
	// token 5's lease (deadline 300) expires under a paused holder; token 6
	// is granted at 310, after it: fine
	b := (&ckHist{}).add(acq(1, 5, 10, 20)).add(acq(2, 6, 30, 310)).
		add(rel(1, 5, 20, 900, 300)).add(rel(2, 6, 310, 400, 600))
	if r := Check(b.ops, "", 0); !r.OK() || r.Expiries != 1 {
		t.Fatalf("%+v", r)
	}
	// granted at 250: token 5 ended 50 before its deadline
	b = (&ckHist{}).add(acq(1, 5, 10, 20)).add(acq(2, 6, 30, 250)).
		add(rel(1, 5, 20, 900, 300)).add(rel(2, 6, 250, 400, 600))
	r := Check(b.ops, "", 0)
	if r.EarlyExpiry != 1 || r.EarlyWorst != 50 || r.OK() {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(strings.Join(r.Problems, "\n"), "early expiry on lock sku-0: token 5 (w1#1, standalone lease) was not released before token 6 was granted (w2#1, returned 00:00:00.000000), 50ns before its safe deadline") {
		t.Fatalf("problem line: %q", r.Problems)
	}
	// the same, but token 5's release was called (at 240) before token 6
	// was granted: the release may have ended it
	b = (&ckHist{}).add(acq(1, 5, 10, 20)).add(acq(2, 6, 30, 250)).
		add(rel(1, 5, 20, 240, 300)).add(rel(2, 6, 250, 400, 600))
	if r := Check(b.ops, "", 0); !r.OK() || r.Expiries != 0 {
		t.Fatalf("%+v", r)
	}
	// a later token bounds an earlier lease even when it is not the next
	// one (8 returned first), and a lost grant (no hold) counts too
	lost := acq(3, 8, 30, 200)
	b = (&ckHist{}).add(acq(1, 5, 10, 20)).add(acq(2, 6, 30, 310)).add(lost).
		add(rel(1, 5, 20, 900, 300)).add(rel(2, 6, 310, 400, 600)).
		add(ckRelease(3, "sku-0", 8, 200, 200, 205, 210))
	r = Check(b.ops, "", 0)
	if r.EarlyExpiry != 2 || r.EarlyWorst != 400 { // 5 ended 100 early, 6 400 early
		t.Fatalf("%+v\n%s", r, strings.Join(r.Problems, "\n"))
	}
	// records without monotonic times (an older history) are not judged
	b = (&ckHist{}).add(ckAcquire(1, "sku-0", 5, 10, 20)).add(ckAcquire(2, "sku-0", 6, 30, 250)).
		add(ckRelease(1, "sku-0", 5, 20, 300, 900, 905)).add(ckRelease(2, "sku-0", 6, 250, 400, 400, 405))
	if r := Check(b.ops, "", 0); r.EarlyExpiry != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestCheckPlantedLostWrite(t *testing.T) {
	for _, r := range ckPlanted(t, ckSimConfig{bugLostWrite: 0.01}, 3) {
		if r.LostWrites == 0 || r.Linearizable {
			t.Fatalf("lost write not flagged: %+v", r)
		}
		if r.StaleAccepted != 0 || r.TokensRegressed != 0 || r.Overlaps != 0 {
			t.Fatalf("other checkers flagged: %+v", r)
		}
	}
}

func TestCheckPlantedDoubleAdd(t *testing.T) {
	for _, r := range ckPlanted(t, ckSimConfig{bugDoubleAdd: 0.05}, 3) {
		if r.DoubleApplies == 0 || r.Linearizable {
			t.Fatalf("double apply not flagged: %+v", r)
		}
		if r.StaleAccepted != 0 || r.TokensRegressed != 0 || r.Overlaps != 0 || r.LostWrites != 0 {
			t.Fatalf("other checkers flagged: %+v", r)
		}
	}
}

func TestCheckPlantedStaleRead(t *testing.T) {
	for _, r := range ckPlanted(t, ckSimConfig{bugStaleRead: 0.01}, 3) {
		if r.Linearizable {
			t.Fatalf("stale read not flagged: %+v", r)
		}
		if r.StaleAccepted != 0 || r.TokensRegressed != 0 || r.Overlaps != 0 || r.LostWrites != 0 || r.DoubleApplies != 0 {
			t.Fatalf("other checkers flagged: %+v", r)
		}
	}
}

// ---- hand-written histories: exact counts ----

// hb builds a history: each op gets the next counter of its worker.
type ckHist struct {
	ops []Op
	n   map[int]int
}

func (b *ckHist) add(o Op) *ckHist {
	if b.n == nil {
		b.n = map[int]int{}
	}
	b.n[o.Worker]++
	o.N = b.n[o.Worker]
	if o.Out == "" {
		o.Out = OutcomeOK
	}
	b.ops = append(b.ops, o)
	return b
}

func ckWrite(w int, tok uint64, val int64, ver uint64, call, ret int64) Op {
	return Op{Worker: w, Kind: KindWrite, Store: StoreFence, Res: "stock/sku-0", Fenced: true, Token: tok, Value: val,
		Call: call, Return: ret, Version: ver, LastToken: tok}
}

func ckFinal(val int64, tok, ver uint64, at int64) Op {
	return Op{Worker: -1, Kind: KindFinal, Store: StoreFence, Res: "stock/sku-0", Call: at, Return: at + 1,
		ResValue: val, LastToken: tok, Version: ver}
}

func ckAcquire(w int, lock string, tok uint64, call, ret int64) Op {
	return Op{Worker: w, Kind: KindAcquire, Lock: lock, Token: tok, Call: call, Return: ret}
}

func ckRelease(w int, lock string, tok uint64, from, until, call, ret int64) Op {
	return Op{Worker: w, Kind: KindRelease, Lock: lock, Token: tok, HeldFrom: from, HeldUntil: until, Call: call, Return: ret}
}

func TestCheckStaleExact(t *testing.T) {
	// fenced: 5 then 3 accepted (the store skipped the compare)
	b := (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20)).add(ckWrite(2, 3, 8, 2, 30, 40)).add(ckFinal(8, 5, 2, 100))
	r := Check(b.ops, t.TempDir(), 0)
	if r.StaleAccepted != 1 || r.Linearizable {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(r.Problems[0], "w2#1 write token 3 got version 2, after w1#1 token 5 version 1") {
		t.Fatalf("problem line: %q", r.Problems)
	}
	// the same order with tokens 3 then 5 is fine
	b = (&ckHist{}).add(ckWrite(1, 3, 9, 1, 10, 20)).add(ckWrite(2, 5, 8, 2, 30, 40)).add(ckFinal(8, 5, 2, 100))
	ckMustOK(t, Check(b.ops, t.TempDir(), 0))

	// control: plain writes with tokens 5, 3, 4, 6: 3 and 4 both came
	// after 5 was accepted; the register is linearizable
	b = &ckHist{}
	for i, tok := range []uint64{5, 3, 4, 6} {
		o := ckWrite(i, tok, int64(10-i), uint64(i+1), int64(10+20*i), int64(20+20*i))
		o.Fenced, o.LastToken, o.Store, o.Res = false, 0, StorePostgres, "sku-0"
		b.add(o)
	}
	f := ckFinal(7, 0, 4, 200)
	f.Store, f.Res = StorePostgres, "sku-0"
	b.add(f)
	r = Check(b.ops, t.TempDir(), 0)
	if r.StaleAccepted != 2 || !r.Linearizable || r.LostWrites != 0 || r.DoubleApplies != 0 {
		t.Fatalf("control: %+v\n%s", r, strings.Join(r.Problems, "\n"))
	}
}

func TestCheckTokensExact(t *testing.T) {
	// concurrent grants may come in either order
	b := (&ckHist{}).add(ckAcquire(1, "sku-0", 7, 10, 50)).add(ckAcquire(2, "sku-1", 6, 20, 30))
	if r := Check(b.ops, "", 0); r.TokensRegressed != 0 {
		t.Fatalf("concurrent grants flagged: %+v", r)
	}
	// a grant after another returned has a smaller token: on another
	// lock (global order) and on the same lock
	for _, lock := range []string{"sku-1", "sku-0"} {
		b = (&ckHist{}).add(ckAcquire(1, "sku-0", 7, 10, 20)).add(ckAcquire(2, lock, 6, 30, 40))
		r := Check(b.ops, "", 0)
		if r.TokensRegressed != 1 || !strings.Contains(r.Problems[0], "token regressed: w2#1 got token 6 on "+lock) {
			t.Fatalf("%s: %+v", lock, r)
		}
	}
	// a token granted twice, concurrently
	b = (&ckHist{}).add(ckAcquire(1, "sku-0", 7, 10, 50)).add(ckAcquire(2, "sku-1", 7, 20, 30))
	if r := Check(b.ops, "", 0); r.TokensRegressed != 1 || !strings.Contains(r.Problems[0], "token 7 granted twice") {
		t.Fatalf("%+v", r)
	}
	// refused and unknown acquires carry no token
	b = (&ckHist{}).add(ckAcquire(1, "sku-0", 7, 10, 20)).add(ckRelease(1, "sku-0", 7, 20, 50, 50, 60))
	b.add(Op{Worker: 2, Kind: KindAcquire, Lock: "sku-0", Call: 30, Out: OutcomeUnknown})
	b.add(Op{Worker: 3, Kind: KindAcquire, Lock: "sku-0", Call: 30, Return: 40, Out: OutcomeFail})
	if r := Check(b.ops, "", 0); !r.OK() {
		t.Fatalf("%+v", r)
	}
}

func TestCheckOverlapsExact(t *testing.T) {
	b := (&ckHist{}).
		add(ckRelease(1, "sku-0", 5, 10, 100, 100, 110)).
		add(ckRelease(2, "sku-0", 6, 100, 200, 200, 210)). // touches: fine
		add(ckRelease(3, "sku-1", 7, 50, 150, 150, 160))   // another lock: fine
	if r := Check(b.ops, "", 0); r.Overlaps != 0 {
		t.Fatalf("%+v", r)
	}
	b.add(ckRelease(4, "sku-0", 8, 150, 160, 160, 170)) // inside token 6's hold
	b.add(ckRelease(5, "sku-0", 9, 190, 300, 300, 310)) // overlaps token 6's end
	r := Check(b.ops, "", 0)
	if r.Overlaps != 2 || !strings.Contains(r.Problems[0], "overlap on lock sku-0: token 6 (w2#1)") {
		t.Fatalf("%+v", r)
	}
	// a stale or unknown release still carries its hold
	b = (&ckHist{}).add(ckRelease(1, "sku-0", 5, 10, 100, 100, 110))
	o := ckRelease(2, "sku-0", 6, 50, 60, 60, 0)
	o.Out = OutcomeUnknown
	b.add(o)
	if r := Check(b.ops, "", 0); r.Overlaps != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestCheckLostExact(t *testing.T) {
	base := func() *ckHist { return (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20)).add(ckWrite(1, 5, 8, 2, 30, 40)) }
	ckMustOK(t, Check(base().add(ckFinal(8, 5, 2, 100)).ops, "", 0))
	// the final state went back a version: the second write is lost
	r := Check(base().add(ckFinal(9, 5, 1, 100)).ops, "", 0)
	if r.LostWrites != 1 || r.Linearizable {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(r.Problems[0], "lost write on fence:stock/sku-0: w1#2 write token 5 acknowledged version 2") {
		t.Fatalf("%q", r.Problems)
	}
	// the final last token is below two acknowledged writes'
	if r := Check(base().add(ckFinal(8, 4, 2, 100)).ops, "", 0); r.LostWrites != 2 {
		t.Fatalf("%+v", r)
	}
	// two acknowledged writes that both claim version 1: one was lost
	b := (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20)).add(ckWrite(2, 6, 8, 1, 30, 40)).add(ckFinal(8, 6, 1, 100))
	if r := Check(b.ops, "", 0); r.LostWrites != 1 || r.DoubleApplies != 1 || r.Linearizable {
		t.Fatalf("%+v", r)
	}
}

func ckAdd(w int, tok uint64, delta, after int64, ver uint64, id string, call, ret int64) Op {
	return Op{Worker: w, Kind: KindAdd, Store: StoreFence, Res: "stock/sku-0", Fenced: true, Token: tok, Value: delta,
		OpID: id, Call: call, Return: ret, ResValue: after, Version: ver, LastToken: tok}
}

func TestCheckDoubleExact(t *testing.T) {
	// a replayed result carries the original's version: one apply
	b := (&ckHist{}).add(ckAdd(1, 5, 5, 5, 1, "a", 10, 20))
	o := ckAdd(1, 5, 5, 5, 1, "a", 30, 40)
	o.Replayed = true
	b.add(o).add(ckFinal(5, 5, 1, 100))
	ckMustOK(t, Check(b.ops, "", 0))

	// an unknown attempt and its OK retry with the same op_id: one mutation
	u := ckAdd(1, 5, 5, 0, 0, "a", 10, 0)
	u.Out, u.ResValue, u.Version, u.LastToken = OutcomeUnknown, 0, 0, 0
	b = (&ckHist{}).add(u).add(ckAdd(1, 5, 5, 5, 1, "a", 30, 40)).add(ckFinal(5, 5, 1, 100))
	ckMustOK(t, Check(b.ops, "", 0))

	// the same op_id acknowledged twice with different versions
	b = (&ckHist{}).add(ckAdd(1, 5, 5, 5, 1, "a", 10, 20)).add(ckAdd(1, 5, 5, 10, 2, "a", 30, 40)).add(ckFinal(10, 5, 2, 100))
	r := Check(b.ops, "", 0)
	if r.DoubleApplies != 1 || r.Linearizable || !strings.Contains(r.Problems[0], `op_id "a" acknowledged as version 1`) {
		t.Fatalf("%+v", r)
	}

	// one op applied twice (its id forgotten; the first reply was lost):
	// the final version is one more than the history explains
	b = (&ckHist{}).add(ckAdd(1, 5, 5, 10, 2, "a", 10, 40)).add(ckFinal(10, 5, 2, 100))
	r = Check(b.ops, "", 0)
	if r.DoubleApplies != 1 || r.Linearizable || r.LostWrites != 0 {
		t.Fatalf("%+v", r)
	}
	// ... unless an unknown mutation may have taken that version
	u = ckAdd(2, 5, 5, 0, 0, "b", 5, 0)
	u.Out, u.ResValue, u.Version, u.LastToken = OutcomeUnknown, 0, 0, 0
	b.add(u)
	ckMustOK(t, Check(b.ops, "", 0))
}

// An OK op recorded without a return time is taken as returning at +inf:
// it is not "before" anything, and the detail says so; it is a malformed
// record (the worker always records one), so the history does not pass.
func TestCheckOKWithoutReturn(t *testing.T) {
	a := ckAcquire(1, "sku-0", 7, 10, 0)
	b := (&ckHist{}).add(a).add(ckAcquire(2, "sku-1", 6, 30, 40)).
		add(ckRelease(1, "sku-0", 7, 50, 60, 60, 70)).add(ckRelease(2, "sku-1", 6, 40, 60, 60, 70))
	r := Check(b.ops, "", 0)
	if r.TokensRegressed != 0 || !r.Linearizable || !strings.Contains(r.LinearDetail, "1 ops of a definite outcome had no valid return time") {
		t.Fatalf("%+v", r)
	}
	if r.OK() || r.Malformed != 1 || !strings.Contains(strings.Join(r.Problems, "\n"), "malformed record: w1#1 acquire: outcome ok without a return time") {
		t.Fatalf("not flagged as malformed: %+v", r)
	}
	if b.ops[0].Return != 0 {
		t.Fatal("Check changed its input")
	}
}

// TestCheckHistoryFiles checks recorded histories: CHAOS_CHECK_HISTORY is a
// glob of JSONL files (workers' histories and the final reads), e.g.
//
//	CHAOS_CHECK_HISTORY='/tmp/run/history-*.jsonl' go test -run HistoryFiles -v ./testkit/chaos
func TestCheckHistoryFiles(t *testing.T) {
	glob := os.Getenv("CHAOS_CHECK_HISTORY")
	if glob == "" {
		t.Skip("CHAOS_CHECK_HISTORY not set")
	}
	paths, err := filepath.Glob(glob)
	if err != nil || len(paths) == 0 {
		t.Fatalf("%q: %v (%d files)", glob, err, len(paths))
	}
	ops, err := ReadHistoryFiles(paths...)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := Check(ops, t.TempDir(), time.Minute)
	t.Logf("%d files, checked in %v: %+v", len(paths), time.Since(start), r)
	for _, p := range r.Problems {
		t.Log(p)
	}
}

// ---- incomplete and malformed histories ----

// F1: a resource some op touched needs an OK final read; without one (no
// line, a torn line, a failed or unknown read) checkers 4 and 5 are off
// for it, and the history does not pass.
func TestCheckMissingFinal(t *testing.T) {
	// version 2 acknowledged: a final read would show the loss
	lost := func() *ckHist {
		return (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20)).add(ckWrite(1, 5, 8, 2, 30, 40))
	}
	r := Check(lost().ops, "", 0)
	if r.OK() || r.MissingFinal != 1 || r.LostWrites != 0 {
		t.Fatalf("no final read: %+v", r)
	}
	if p := strings.Join(r.Problems, "\n"); !strings.Contains(p, "no final read of fence:stock/sku-0: its 2 acknowledged and 0 unknown mutations are not checked") {
		t.Fatalf("problem line: %q", r.Problems)
	}
	for _, out := range []Outcome{OutcomeFail, OutcomeUnknown} {
		f := ckFinal(9, 5, 1, 100)
		f.Out, f.Err = out, "connection refused"
		if out == OutcomeUnknown {
			f.Return = 0
		}
		r := Check(lost().add(f).ops, "", 0)
		if r.OK() || r.MissingFinal != 1 || r.Malformed != 0 {
			t.Fatalf("final read %s: %+v", out, r)
		}
		if p := strings.Join(r.Problems, "\n"); !strings.Contains(p, "final read of fence:stock/sku-0 not ok (harness#1") || !strings.Contains(p, "out "+string(out)) {
			t.Fatalf("final read %s: problem line: %q", out, r.Problems)
		}
	}
	// counted per resource: a read of another resource, and a refused
	// write of a third, each need one too
	b := lost().add(ckFinal(8, 5, 2, 100))
	rd := Op{Worker: 2, Kind: KindRead, Store: StorePostgres, Res: "sku-1", Call: 50, Return: 60, Fenced: true}
	wr := ckWrite(3, 4, 1, 0, 50, 60)
	wr.Store, wr.Res, wr.Out, wr.Version, wr.LastToken = StorePostgres, "sku-2", OutcomeFail, 0, 0
	b.add(rd).add(wr)
	if r := Check(b.ops, "", 0); r.OK() || r.MissingFinal != 2 {
		t.Fatalf("%+v", r)
	}
	ckMustOK(t, Check(lost().add(ckFinal(8, 5, 2, 100)).ops, "", 0))
}

func ckRefusal(w int, tok, last uint64, call, ret int64) Op {
	o := ckWrite(w, tok, 77, 0, call, ret)
	o.Out, o.LastToken, o.Version, o.Err = OutcomeStale, last, 0, "stale token"
	return o
}

// F2: a fenced write refused as stale that quotes the last token is
// checked by checker 6: its token must be below the register's last token
// (an equal token is accepted: G4), and the quoted token must be it.
func TestCheckStaleRefusals(t *testing.T) {
	hist := func(extra ...Op) []Op {
		b := (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20))
		for _, o := range extra {
			b.add(o)
		}
		return b.add(ckFinal(9, 5, 1, 100)).ops
	}
	r := Check(hist(ckRefusal(2, 3, 5, 30, 40)), "", 0)
	ckMustOK(t, r)
	if r.StaleRefused != 1 {
		t.Fatalf("stale refused %d, want 1", r.StaleRefused)
	}
	// concurrent with the write that set token 5: fine
	ckMustOK(t, Check(hist(ckRefusal(2, 3, 5, 15, 25)), "", 0))
	// a refusal without the last token (not holder) stays out
	if r := Check(hist(ckRefusal(2, 5, 0, 30, 40)), "", 0); !r.OK() || r.StaleRefused != 1 {
		t.Fatalf("%+v", r)
	}
	for _, c := range []struct {
		name string
		op   Op
	}{
		{"equal token (the owner refused)", ckRefusal(2, 5, 5, 30, 40)},
		{"higher token", ckRefusal(2, 6, 5, 30, 40)},
		{"last token never accepted", ckRefusal(2, 3, 99, 30, 40)},
		{"before token 5 was written", ckRefusal(2, 3, 5, 1, 5)},
	} {
		r := Check(hist(c.op), "", 0)
		if r.Linearizable || r.OK() || r.StaleRefused != 1 {
			t.Errorf("%s: not flagged: %+v", c.name, r)
			continue
		}
		if p := strings.Join(r.Problems, "\n"); !strings.Contains(p, "cannot place w2#1 write 77 token") || !strings.Contains(p, "refused stale (last token") {
			t.Errorf("%s: problem line: %q", c.name, r.Problems)
		}
	}
	// an add refused with the current owner's token
	add := ckAdd(2, 5, 5, 0, 0, "a", 30, 40)
	add.Out, add.LastToken = OutcomeStale, 5
	if r := Check(hist(add), "", 0); r.Linearizable {
		t.Fatalf("add refused with the last token: %+v", r)
	}
	// a plain write is never refused as stale
	plain := ckRefusal(2, 3, 5, 30, 40)
	plain.Fenced = false
	if r := Check(hist(plain), "", 0); r.OK() || r.Malformed != 1 || r.StaleRefused != 0 {
		t.Fatalf("plain write refused: %+v", r)
	}
}

// A refusal may quote the token of a mutation of unknown outcome, also one
// whose version only a later segment observes.
func TestCheckStaleRefusalSeesUnknown(t *testing.T) {
	build := func(refusalTok, quoted uint64) []Op {
		b := (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20)).add(ckUnknownWrite(3, 7, 42, 25))
		b.add(ckRefusal(2, refusalTok, quoted, 30, 40))
		b.add(Op{Worker: 4, Kind: KindRead, Store: StoreFence, Res: "stock/sku-0", Call: 50, Return: 60, ResValue: 42, LastToken: 7, Version: 2})
		return b.add(ckFinal(42, 7, 2, 100)).ops
	}
	for _, n := range []int{1000, 1} {
		ckWithSegments(t, n, func() {
			if r := Check(build(6, 7), "", 0); !r.OK() {
				t.Fatalf("segments of %d: %+v", n, r)
			}
			if r := Check(build(7, 7), "", 0); r.Linearizable {
				t.Fatalf("segments of %d: the owner of token 7 refused: %+v", n, r)
			}
		})
	}
}

// F3: a history without a worker's op checks nothing and does not pass.
func TestCheckEmptyHistory(t *testing.T) {
	for name, ops := range map[string][]Op{
		"no ops":      nil,
		"finals only": (&ckHist{}).add(ckFinal(0, 0, 0, 100)).ops,
	} {
		r := Check(ops, "", 0)
		if r.OK() || !r.Empty || len(r.Problems) == 0 || !strings.Contains(strings.Join(r.Problems, "\n"), "empty history") {
			t.Fatalf("%s: %+v", name, r)
		}
	}
}

// F9: records no worker writes are counted, said, and fail the history.
func TestCheckMalformed(t *testing.T) {
	base := func() *ckHist {
		return (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20))
	}
	ckMustOK(t, Check(base().add(ckFinal(9, 5, 1, 100)).ops, "", 0))
	cases := []struct {
		name string
		edit func(*Op)
		want string
	}{
		{"return before call", func(o *Op) { o.Return = 5 }, "malformed record: w1#1 write: outcome ok returned"},
		{"no return", func(o *Op) { o.Return = 0 }, "malformed record: w1#1 write: outcome ok without a return time"},
		{"unknown kind", func(o *Op) { o.Kind = "Write" }, `malformed record: w1#1: unknown kind "Write"`},
		{"unknown outcome", func(o *Op) { o.Out = "OK" }, `malformed record: w1#1 write: unknown outcome "OK"`},
	}
	for _, c := range cases {
		b := base()
		c.edit(&b.ops[0])
		b.add(ckFinal(9, 5, 1, 100))
		r := Check(b.ops, "", 0)
		if r.OK() || r.Malformed != 1 {
			t.Errorf("%s: %+v", c.name, r)
			continue
		}
		if p := strings.Join(r.Problems, "\n"); !strings.Contains(p, c.want) {
			t.Errorf("%s: problem lines %q, want %q", c.name, r.Problems, c.want)
		}
	}
}

// F10: checker 3 sees a hold only through its release record; an OK
// acquire without one is malformed (the worker records a release for
// every lease it got, lost or not, also when stopped).
func TestCheckHoldWithoutRelease(t *testing.T) {
	b := (&ckHist{}).add(ckAcquire(1, "sku-0", 5, 10, 20)).add(ckAcquire(2, "sku-0", 6, 30, 40)).
		add(ckRelease(2, "sku-0", 6, 40, 50, 50, 60))
	r := Check(b.ops, "", 0)
	if r.OK() || r.Malformed != 1 || !strings.Contains(strings.Join(r.Problems, "\n"),
		"malformed record: hold without a release record: w1#1 acquire of sku-0 token 5") {
		t.Fatalf("%+v", r)
	}
	// a release of the same token on another lock is not its release
	b.add(ckRelease(1, "sku-1", 5, 20, 25, 25, 30))
	if r := Check(b.ops, "", 0); r.Malformed != 1 {
		t.Fatalf("%+v", r)
	}
	// a refused release (the lease had expired) is its release record
	rel := ckRelease(1, "sku-0", 5, 20, 25, 70, 80)
	rel.Out = OutcomeStale
	b.add(rel)
	ckMustOK(t, Check(b.ops, "", 0))
}
