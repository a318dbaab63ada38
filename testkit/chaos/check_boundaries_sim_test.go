package chaos

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// bsim generates histories of lock-boundary workers (sets of 1–3 of four
// locks, some shared; holders of 2 permits of a fifth) against a model
// server that is correct unless a bug knob is set; holders are paused past
// their lease at times (the server ends it at its deadline), and look at
// the holders of a lock now and then. Time is in abstract units.
type bsimConfig struct {
	seed   uint64
	ops    int
	pauseP float64

	bugConflict  float64 // a grant that has no room (beside an exclusive holder, or beside a shared one if exclusive)
	bugPermits   float64 // a permit grant beyond the count
	bugSetSplit  float64 // a set's release frees only its first lock
	bugTokenBack float64 // a grant takes a token below the last
}

type bsimHolder struct {
	token   uint64
	mode    string
	expires int64 // 0: until released
}

type bsimWorker struct {
	busy    int64
	n       int
	holding bool
	acq     Op
	from    int64
	lostAt  int64
	looks   int
}

type bsim struct {
	cfg     bsimConfig
	rng     *rand.Rand
	now     int64
	tok     uint64
	holders map[string][]bsimHolder
	ws      []bsimWorker
	ops     []Op
}

const (
	bsimTTL     = 300
	bsimPermits = 2
	bsimPermit  = "permit-0"
)

var bsimLocks = []string{"set-0", "set-1", "set-2", "set-3"}

func bsimulate(cfg bsimConfig) []Op {
	s := &bsim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, 23)), now: 1_000_000, holders: map[string][]bsimHolder{}, ws: make([]bsimWorker, 6)}
	for len(s.ops) < cfg.ops {
		s.now += 1 + int64(s.rng.IntN(4))
		s.expire()
		w := s.rng.IntN(len(s.ws))
		if s.ws[w].busy > s.now {
			continue
		}
		s.step(w)
	}
	for w := range s.ws {
		if s.ws[w].holding {
			s.now = max(s.now, s.ws[w].busy) + 1
			s.expire()
			s.release(w)
		}
	}
	return s.ops
}

func (s *bsim) chance(p float64) bool { return p > 0 && s.rng.Float64() < p }

func (s *bsim) expire() {
	for l, hs := range s.holders {
		s.holders[l] = slices.DeleteFunc(hs, func(h bsimHolder) bool { return h.expires != 0 && h.expires <= s.now })
	}
}

func (s *bsim) op(w int, kind Kind) Op {
	s.ws[w].n++
	return Op{Worker: w, N: s.ws[w].n, Kind: kind, Call: s.now, CallMono: s.now, Out: OutcomeOK, Session: true}
}

func (s *bsim) end(w int, o Op) Op {
	o.Return = s.now + 1 + int64(s.rng.IntN(5))
	if o.Kind != KindHolders {
		o.RetMono = o.Return
	} else {
		o.CallMono = 0
	}
	s.ws[w].busy = o.Return + 1
	s.ops = append(s.ops, o)
	return o
}

// room: lock l admits a hold of mode (permits: one of bsimPermits).
func (s *bsim) room(l, mode string, permits uint32) bool {
	hs := s.holders[l]
	if permits > 0 {
		return len(hs) < int(permits) || s.chance(s.cfg.bugPermits)
	}
	ok := len(hs) == 0 || mode == ModeShared && !slices.ContainsFunc(hs, func(h bsimHolder) bool { return h.mode == "" })
	return ok || s.chance(s.cfg.bugConflict)
}

func (s *bsim) step(w int) {
	ws := &s.ws[w]
	switch {
	case !ws.holding:
		s.acquire(w)
	case ws.lostAt == 0 && s.chance(s.cfg.pauseP):
		// paused past its lease: the server ends it at its deadline
		ws.lostAt = s.now
		for _, r := range s.locksOf(ws.acq) {
			for i, h := range s.holders[r.Name] {
				if h.token == ws.acq.Token {
					s.holders[r.Name][i].expires = s.now
				}
			}
		}
		ws.busy = s.now + bsimTTL
	case ws.looks < 2 && s.rng.IntN(2) == 0:
		ws.looks++
		s.look(w, s.locksOf(ws.acq)[s.rng.IntN(len(s.locksOf(ws.acq)))].Name)
	default:
		s.release(w)
	}
}

func (s *bsim) locksOf(o Op) []LockRef {
	if len(o.Set) > 0 {
		return o.Set
	}
	return []LockRef{{Name: o.Lock, Mode: o.Mode, Permits: o.Permits}}
}

func (s *bsim) acquire(w int) {
	o := s.op(w, KindAcquire)
	if s.rng.IntN(4) == 0 {
		o.Lock, o.Permits = bsimPermit, bsimPermits
	} else {
		n := 1 + s.rng.IntN(3)
		var set []LockRef
		for _, i := range s.rng.Perm(len(bsimLocks))[:n] {
			r := LockRef{Name: bsimLocks[i]}
			if s.rng.IntN(2) == 0 {
				r.Mode = ModeShared
			}
			set = append(set, r)
		}
		slices.SortFunc(set, func(a, b LockRef) int { return strings.Compare(a.Name, b.Name) })
		if n == 1 {
			o.Lock, o.Mode = set[0].Name, set[0].Mode
		} else {
			o.Lock, o.Set = set[0].Name, set
		}
	}
	for _, r := range s.locksOf(o) {
		if !s.room(r.Name, r.Mode, r.Permits) {
			s.ws[w].n-- // a waiting acquire: it tries again later
			return
		}
	}
	if s.tok > 10 && s.chance(s.cfg.bugTokenBack) {
		s.tok -= 5
	}
	s.tok++
	o.Token = s.tok
	for _, r := range s.locksOf(o) {
		s.holders[r.Name] = append(s.holders[r.Name], bsimHolder{token: o.Token, mode: r.Mode})
	}
	for _, r := range o.Set {
		r.Proof = o.Token
		o.Granted = append(o.Granted, r)
	}
	o = s.end(w, o)
	s.ws[w] = bsimWorker{busy: s.ws[w].busy, n: s.ws[w].n, holding: true, acq: o, from: o.Return}
}

func (s *bsim) look(w int, l string) {
	o := s.op(w, KindHolders)
	o.Lock, o.Session = l, false
	if l == bsimPermit {
		o.Permits = bsimPermits
	}
	for _, h := range s.holders[l] {
		o.Holders = append(o.Holders, LockRef{Token: h.token, Mode: h.mode})
	}
	s.end(w, o)
}

func (s *bsim) release(w int) {
	ws := &s.ws[w]
	o := s.op(w, KindRelease)
	o.Lock, o.Mode, o.Permits, o.Set, o.Token = ws.acq.Lock, ws.acq.Mode, ws.acq.Permits, ws.acq.Set, ws.acq.Token
	o.HeldFrom, o.HeldUntil, o.DeadlineMono = ws.from, o.Call, o.Call+bsimTTL
	if ws.lostAt != 0 {
		o.HeldUntil, o.DeadlineMono = ws.lostAt, ws.lostAt
	}
	held := false
	split := len(o.Set) > 1 && s.chance(s.cfg.bugSetSplit)
	for i, r := range s.locksOf(o) {
		if split && i > 0 {
			continue
		}
		n := len(s.holders[r.Name])
		s.holders[r.Name] = slices.DeleteFunc(s.holders[r.Name], func(h bsimHolder) bool { return h.token == o.Token })
		held = held || len(s.holders[r.Name]) < n
	}
	if !held {
		o.Out, o.Err = OutcomeStale, "not held"
	}
	s.end(w, o)
	s.ws[w] = bsimWorker{busy: ws.busy, n: ws.n}
	if !split && s.rng.IntN(2) == 0 {
		return
	}
	// a look at one of its locks after the release
	s.now = s.ws[w].busy + 1
	s.expire()
	ls := s.locksOf(o)
	s.look(w, ls[len(ls)-1].Name)
}

func TestCheckBoundariesSimClean(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		ops := bsimulate(bsimConfig{seed: seed, ops: 2000, pauseP: 0.05})
		r := Check(ops, "", 0)
		if !r.OK() {
			t.Fatalf("seed %d: clean history flagged: %+v\n%s", seed, r, ckProblems(r))
		}
		sets := ckCount(ops, func(o Op) bool { return o.Kind == KindAcquire && len(o.Set) > 0 })
		shared := ckCount(ops, func(o Op) bool { return o.Kind == KindHolders && len(o.Holders) > 1 && o.Lock != bsimPermit })
		permits := ckCount(ops, func(o Op) bool { return o.Kind == KindHolders && len(o.Holders) == bsimPermits && o.Lock == bsimPermit })
		if sets < 50 || shared == 0 || permits == 0 || r.Expiries == 0 {
			t.Fatalf("seed %d: the history lacks what it should test: %d sets, %d looks at shared holders, %d at full permits, %d expiries", seed, sets, shared, permits, r.Expiries)
		}
	}
}

func TestCheckBoundariesSimPlanted(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    bsimConfig
		caught func(Report) bool
	}{
		{"grant without room", bsimConfig{bugConflict: 0.05}, func(r Report) bool { return r.Overlaps > 0 }},
		{"permit beyond the count", bsimConfig{bugPermits: 0.3}, func(r Report) bool { return r.PermitsExceeded > 0 }},
		{"set released on one lock", bsimConfig{bugSetSplit: 0.3}, func(r Report) bool { return r.SetsBroken > 0 }},
		{"token back", bsimConfig{bugTokenBack: 0.02}, func(r Report) bool { return r.TokensRegressed > 0 }},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			cfg := c.cfg
			cfg.seed, cfg.ops, cfg.pauseP = seed, 2000, 0.05
			r := Check(bsimulate(cfg), "", 0)
			if !c.caught(r) || r.OK() {
				t.Errorf("%s, seed %d: not caught: %+v\n%s", c.name, seed, r, ckProblems(r))
			}
		}
	}
}
