package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// sim generates histories of the seed's workload against a model of the
// server that is correct unless a bug knob is set: workers acquire a lock,
// read, write value-1, sometimes add +5 with an op_id, and release; faults
// make outcomes unknown and leases expire under paused workers. Time is in
// abstract units (nanoseconds for the checkers).
type simConfig struct {
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
}

type simReg struct {
	value     int64
	last      uint64
	version   uint64
	prev      simRegSnap
	appliedBy string // op_id of the last mutation
}

type simRegSnap struct {
	value   int64
	last    uint64
	version uint64
}

type simWorker struct {
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

type sim struct {
	cfg     simConfig
	rng     *rand.Rand
	now     int64
	tok     uint64
	holder  []uint64
	expires []int64 // when an abandoned holder's lease ends
	regs    map[resKey]*simReg
	ws      []simWorker
	ops     []Op
	opids   int
}

const simTTL = 400

func resName(store string, k int) string {
	if store == StoreFence {
		return fmt.Sprintf("stock/sku-%d", k)
	}
	return fmt.Sprintf("sku-%d", k)
}

func simulate(cfg simConfig) []Op {
	if cfg.workers == 0 {
		cfg.workers = 4
	}
	if cfg.locks == 0 {
		cfg.locks = 3
	}
	if cfg.stores == nil {
		cfg.stores = []string{StoreFence, StorePostgres}
	}
	s := &sim{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.seed, 7)),
		now:     1_000_000,
		holder:  make([]uint64, cfg.locks),
		expires: make([]int64, cfg.locks),
		regs:    map[resKey]*simReg{},
		ws:      make([]simWorker, cfg.workers),
	}
	for _, st := range cfg.stores {
		for k := 0; k < cfg.locks; k++ {
			r := &simReg{}
			if st == StorePostgres {
				r.value = 100 // set up by the harness: version 0
			}
			s.regs[resKey{st, resName(st, k)}] = r
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
	// every worker stops; the harness reads every resource
	s.now += 10 * simTTL
	for _, st := range cfg.stores {
		for k := 0; k < cfg.locks; k++ {
			name := resName(st, k)
			r := s.regs[resKey{st, name}]
			s.now += 5
			s.ops = append(s.ops, Op{Worker: -1, N: len(s.ops), Kind: KindFinal, Store: st, Res: name,
				Call: s.now, Return: s.now + 2, Out: OutcomeOK, ResValue: r.value, LastToken: r.last, Version: r.version})
		}
	}
	return s.ops
}

func (s *sim) chance(p float64) bool { return p > 0 && s.rng.Float64() < p }

// begin makes the op of worker w applied at s.now: Call before, Return after.
func (s *sim) begin(w int, kind Kind) Op {
	ws := &s.ws[w]
	ws.n++
	call := max(ws.busy, s.now-int64(s.rng.IntN(20)))
	return Op{Worker: w, N: ws.n, Kind: kind, Call: call, Out: OutcomeOK}
}

func (s *sim) end(w int, op Op) {
	ws := &s.ws[w]
	if op.Out == OutcomeUnknown {
		op.Return = 0
		ws.busy = s.now + 30 + int64(s.rng.IntN(30)) // the worker gave up on it
	} else {
		op.Return = s.now + 1 + int64(s.rng.IntN(20))
		ws.busy = op.Return + 1
	}
	s.ops = append(s.ops, op)
}

func (s *sim) step(w int) {
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
		ws.busy = s.now + simTTL
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

func (s *sim) acquire(w int) {
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
		s.expires[k] = s.now + simTTL
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
	*ws = simWorker{busy: ws.busy, n: ws.n, holding: true, lock: k, token: op.Token, from: s.ops[len(s.ops)-1].Return, store: st, script: script}
}

func (s *sim) reg(w int) (*simReg, resKey) {
	ws := &s.ws[w]
	k := resKey{ws.store, resName(ws.store, ws.lock)}
	return s.regs[k], k
}

func (s *sim) read(w int) {
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

func (s *sim) apply(r *simReg, op Op) {
	kind, token, v, fenced := op.Kind, op.Token, op.Value, op.Fenced
	r.prev = simRegSnap{r.value, r.last, r.version}
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

func (s *sim) mutate(w int, kind Kind) {
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
func (s *sim) retryAdd(w int, first Op, r *simReg) {
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

func (s *sim) release(w int) {
	ws := &s.ws[w]
	op := s.begin(w, KindRelease)
	op.Lock, op.Token, op.HeldFrom = fmt.Sprintf("sku-%d", ws.lock), ws.token, ws.from
	op.HeldUntil = op.Call
	if ws.lostAt != 0 {
		op.HeldUntil = min(op.HeldUntil, ws.lostAt)
	}
	switch {
	case s.holder[ws.lock] != ws.token:
		op.Out, op.Err = OutcomeStale, "not held"
	case s.chance(s.cfg.unknownP):
		op.Out = OutcomeUnknown
		if s.rng.IntN(2) == 0 {
			s.holder[ws.lock] = 0
		} else {
			s.expires[ws.lock] = s.now + simTTL
		}
	default:
		s.holder[ws.lock] = 0
	}
	s.end(w, op)
	*ws = simWorker{busy: ws.busy, n: ws.n}
}

// ---- tests ----

func mustOK(t *testing.T, r Report) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("clean history flagged: %+v\n%s", r, strings.Join(r.Problems, "\n"))
	}
}

func count(ops []Op, f func(Op) bool) int {
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
		ops := simulate(simConfig{seed: seed, ops: 2000, tryP: 0.3})
		r := Check(ops, t.TempDir(), 0)
		mustOK(t, r)
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
		ops := simulate(simConfig{seed: seed, ops: 1500, unknownP: 0.15, pauseP: 0.1, tryP: 0.2})
		unknown := count(ops, func(o Op) bool { return o.Out == OutcomeUnknown })
		stale := count(ops, func(o Op) bool { return o.Out == OutcomeStale && o.Kind != KindRelease })
		replayed := count(ops, func(o Op) bool { return o.Replayed })
		if unknown < 50 || stale == 0 || replayed == 0 {
			t.Fatalf("seed %d: the history lacks what it should test: %d unknown, %d stale writes, %d replayed", seed, unknown, stale, replayed)
		}
		mustOK(t, Check(ops, t.TempDir(), 0))
	}
}
