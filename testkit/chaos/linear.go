package chaos

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Checker 6: linearizability with porcupine, one partition per register
// (store, resource) and one per lock, each with its own small model.
//
// Register model. State: value, last token, version; every resource starts
// at 0, 0, 0 (an absent resource reads so; PostgreSQL rows are set up so).
// A read (or the harness's final read) must see exactly the state. An OK
// fenced write or add is allowed iff its token is at least the last token;
// it sets the last token to its own, and its version must be the state's
// plus one (and its reported value/last token must match). A plain write
// (the control run's, Fenced false) applies whatever its token; a register
// with plain writes does not track tokens at all.
//
// A fenced write or add refused as stale that quotes the store's last
// accepted token (rt > 0: a StaleTokenError) is a read of the last token: it
// is allowed iff its token is below the state's last token and rt equals it,
// and changes nothing. (An equal token is accepted, G4: refusing the current
// owner is a violation.) A refusal without rt (not holder, lease expired)
// says nothing about the register and stays out.
//
// A mutation of unknown outcome gets Return = +inf: it may have applied at
// any time after its call, or never, which is the same as applying after the
// final read (or being refused). To keep the search small it may only apply
// where the history leaves room for it: at a version that no OK mutation
// reports (a "gap"; OK mutations each name their own version), and only if
// the fencing rule allows it; once the state has reached the largest version
// the history observes, it is a no-op (nothing after it could tell). In a
// correct history the unknown mutations that applied took exactly the gap
// versions, so this loses no linearization; it saves porcupine from trying
// every subset of pending unknown mutations before each OK one.
//
// Lock model. State: the holders' tokens and the largest token granted.
// An OK acquire needs a token above every token granted before it in the
// linearization; an exclusive one makes it the only holder, a shared or
// permit one adds it to the holders (how many may hold at once is checkers
// 3 and 3c's, on the holds); an OK release needs its token to be a holder
// and removes it (a set's acquire and release are one op on each of its
// locks, with its mode on each) (a standalone lease's release OK may also
// come from a retry that found the token already gone: see lockInput.loose).
// A holder may vanish at any time (its lease
// expired): no step requires a free lock, so that costs no extra state. A
// refused release or try-acquire (stale/fail) is always allowed and changes
// nothing a later step depends on, and an acquire or release of unknown
// outcome could only constrain the others further, so only OK acquires and
// releases enter the lock history.

type regInput struct {
	kind    Kind
	token   uint64
	value   int64 // write: the value; add: the delta
	fenced  bool
	unknown bool
	refused bool // refused as stale; regOutput.last is the quoted last token
}

type regOutput struct {
	value   int64 // read/final: the value; add: the value after
	last    uint64
	version uint64
}

type regState struct {
	Value int64
	Last  uint64
	Ver   uint64
	Known bool // Value is known (it was read or written)
}

type lockInput struct {
	acquire bool
	token   uint64
	shared  bool // acquire: shared, or one of a semaphore's permits
	// loose: a standalone lease's release. client.Release retries a unary
	// release whose outcome is unknown and takes the retry's "not holder"
	// as success, which it also is when the lease had expired meanwhile
	// and the lock moved on; so its OK says the token no longer holds the
	// lock, not that this release freed it. A session's release is exactly
	// once by seq: its OK is strict.
	loose bool
}

type lockState struct {
	Holder uint64 // the only holder (0: none, or Shared lists them)
	// Shared: two or more holders, their tokens ascending, 8 bytes each
	// (a string, so that the state stays comparable)
	Shared string
	Max    uint64
}

// holders returns the tokens holding the lock, ascending.
func (st lockState) holders() []uint64 {
	if st.Shared == "" {
		if st.Holder == 0 {
			return nil
		}
		return []uint64{st.Holder}
	}
	out := make([]uint64, len(st.Shared)/8)
	for i := range out {
		out[i] = binary.BigEndian.Uint64([]byte(st.Shared[8*i : 8*i+8]))
	}
	return out
}

// withHolders returns st holding exactly toks (ascending).
func (st lockState) withHolders(toks []uint64) lockState {
	st.Holder, st.Shared = 0, ""
	switch len(toks) {
	case 0:
	case 1:
		st.Holder = toks[0]
	default:
		b := make([]byte, 8*len(toks))
		for i, t := range toks {
			binary.BigEndian.PutUint64(b[8*i:], t)
		}
		st.Shared = string(b)
	}
	return st
}

// lockStep applies an acquire or release to st: ok false when the model
// does not allow it (a loose release of a token that is not a holder is
// allowed and changes nothing).
func lockStep(st lockState, i lockInput) (bool, lockState) {
	if i.acquire {
		if i.token <= st.Max {
			return false, st
		}
		st.Max = i.token
		if !i.shared {
			return true, st.withHolders([]uint64{i.token})
		}
		return true, st.withHolders(append(st.holders(), i.token)) // above every holder: stays ascending
	}
	hs := st.holders()
	k := slices.Index(hs, i.token)
	if k < 0 {
		return i.loose, st
	}
	return true, st.withHolders(slices.Delete(hs, k, k+1))
}

func hashMix(h, v uint64) uint64 {
	h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
	return h
}

// registerModel builds the model of one register. gaps[v] is true for the
// versions 1..vmax that no OK mutation reports; tokens is false for a
// register with plain writes. Once the state is at vmax, an unknown mutation
// applies if it can at a gap up to vtop (>= vmax; only a stale refusal could
// tell), else it is a no-op.
func registerModel(init regState, gaps []bool, vmax, vtop uint64, tokens bool) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return init },
		Step: func(s, in, out interface{}) (bool, interface{}) {
			st := s.(regState)
			i := in.(regInput)
			if i.kind == KindRead || i.kind == KindFinal {
				o := out.(regOutput)
				if o.version != st.Ver || (st.Known && o.value != st.Value) || (tokens && o.last != st.Last) {
					return false, st
				}
				st.Value, st.Known = o.value, true
				return true, st
			}
			if i.refused {
				o := out.(regOutput)
				return tokens && i.token < st.Last && o.last == st.Last, st
			}
			allowed := !tokens || !i.fenced || i.token >= st.Last
			if i.unknown {
				if st.Ver >= vmax {
					if st.Ver < vtop && allowed && gaps[st.Ver+1] {
						return true, regApply(st, i, tokens)
					}
					return true, st // after everything observed: as if never applied
				}
				if !allowed || !gaps[st.Ver+1] {
					return false, st
				}
				return true, regApply(st, i, tokens)
			}
			o := out.(regOutput)
			if !allowed || o.version != st.Ver+1 {
				return false, st
			}
			if i.kind == KindAdd && st.Known && st.Value+i.value != o.value {
				return false, st
			}
			ns := regApply(st, i, tokens)
			if i.kind == KindAdd {
				ns.Value, ns.Known = o.value, true
			}
			if tokens && i.fenced && o.last != 0 && o.last != ns.Last {
				return false, st
			}
			return true, ns
		},
		Hash: func(s interface{}) uint64 {
			st := s.(regState)
			h := hashMix(uint64(st.Value), st.Last)
			h = hashMix(h, st.Ver)
			if st.Known {
				h = hashMix(h, 1)
			}
			return h
		},
		DescribeOperation: func(in, out interface{}) string {
			i := in.(regInput)
			var b strings.Builder
			switch i.kind {
			case KindRead, KindFinal:
				o := out.(regOutput)
				fmt.Fprintf(&b, "%s → %d (token %d, ver %d)", i.kind, o.value, o.last, o.version)
				return b.String()
			case KindAdd:
				fmt.Fprintf(&b, "add %+d", i.value)
			default:
				fmt.Fprintf(&b, "write %d", i.value)
			}
			if i.fenced {
				fmt.Fprintf(&b, " token %d", i.token)
			} else {
				fmt.Fprintf(&b, " plain (token %d)", i.token)
			}
			if i.refused {
				fmt.Fprintf(&b, " → refused stale (last token %d)", out.(regOutput).last)
				return b.String()
			}
			if i.unknown {
				b.WriteString(" → unknown")
				return b.String()
			}
			o := out.(regOutput)
			if i.kind == KindAdd {
				fmt.Fprintf(&b, " → %d", o.value)
			}
			fmt.Fprintf(&b, " → ver %d", o.version)
			return b.String()
		},
		DescribeState: func(s interface{}) string {
			st := s.(regState)
			v := "?"
			if st.Known {
				v = fmt.Sprint(st.Value)
			}
			if !tokens {
				return fmt.Sprintf("value %s, ver %d", v, st.Ver)
			}
			return fmt.Sprintf("value %s, token %d, ver %d", v, st.Last, st.Ver)
		},
		DescribeOperationMetadata: describeMeta,
	}
}

func regApply(st regState, i regInput, tokens bool) regState {
	st.Ver++
	if i.kind == KindAdd {
		st.Value += i.value
	} else {
		st.Value, st.Known = i.value, true
	}
	if tokens && i.fenced {
		st.Last = i.token
	}
	return st
}

func lockModel(init lockState) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return init },
		Step: func(s, in, _ interface{}) (bool, interface{}) {
			return lockStep(s.(lockState), in.(lockInput))
		},
		Hash: func(s interface{}) uint64 {
			st := s.(lockState)
			h := hashMix(st.Holder, st.Max)
			for _, t := range st.holders() {
				h = hashMix(h, t)
			}
			return h
		},
		DescribeOperation: func(in, _ interface{}) string {
			i := in.(lockInput)
			if i.acquire && i.shared {
				return fmt.Sprintf("acquire (shared or permit) → token %d", i.token)
			}
			if i.acquire {
				return fmt.Sprintf("acquire → token %d", i.token)
			}
			if i.loose {
				return fmt.Sprintf("release token %d → ok (standalone: or already gone)", i.token)
			}
			return fmt.Sprintf("release token %d → ok", i.token)
		},
		DescribeState: func(s interface{}) string {
			st := s.(lockState)
			if hs := st.holders(); len(hs) == 0 {
				return fmt.Sprintf("free (max token %d)", st.Max)
			} else if len(hs) > 1 {
				return fmt.Sprintf("held by %v (max token %d)", hs, st.Max)
			}
			return fmt.Sprintf("held by %d (max token %d)", st.Holder, st.Max)
		},
		DescribeOperationMetadata: describeMeta,
	}
}

func describeMeta(m interface{}) string {
	if m == nil {
		return ""
	}
	return fmt.Sprint(m)
}

// segTarget is the number of ops after which a partition is cut at the
// next quiescent point. Porcupine keeps a bitset of the whole history per
// state it caches (n²/8 bytes for n ops in a row): a 10-minute run has
// partitions of 100,000 ops and more, which would take gigabytes in one piece.
var segTarget = 1000

// partition is the history of one register or lock, cut into segments that
// porcupine checks one after the other.
//
// A cut is made at a quiescent point: every op of known outcome before it
// returned before every one after it was called. Each linearization then
// linearizes those before the cut first, and the state at the cut is known:
//   - register: the state at the largest version observed before the cut
//     (by a read, or the OK mutation that reported it). A mutation of
//     unknown outcome that applied at a later version can as well be
//     linearized after the cut: nothing before it observed it.
//   - lock: the largest token granted so far (acquires linearize in token
//     order), held unless its release was acknowledged.
//
// The next segment starts from that state. Unknown mutations called before a
// segment ends are offered to it if they are still alive (a fenced one whose
// token is below the state's last token can never apply) and the segment's
// versions have a gap for them to fill; one may be offered to several
// segments (checker 5 still counts applies against unknown mutations over
// the whole history).
type linPartition struct {
	name string
	segs []*linSegment
	nOps int // ops of the partition (each once)
}

type linSegment struct {
	model    porcupine.Model
	ops      []porcupine.Operation
	src      []*Op // the Op behind each operation
	from, to int64
}

// entry is one op of a partition before it is put in a segment.
type linEntry struct {
	src       *Op
	call, ret int64
	in, out   interface{}
	unknown   bool
	refusal   bool   // register: a stale refusal (no version)
	ver       uint64 // register: the version read or reported
}

// clients gives each (worker, unknown) pair its own row in a visualisation.
type linClients map[[2]int]int

func (c linClients) id(o Op, unknown bool) int {
	k := [2]int{o.Worker, 0}
	if unknown {
		k[1] = 1
	}
	if id, ok := c[k]; ok {
		return id
	}
	c[k] = len(c)
	return c[k]
}

func newLinSegment(m porcupine.Model, es []linEntry) *linSegment {
	s := &linSegment{model: m, from: math.MaxInt64}
	c := linClients{}
	for _, e := range es {
		meta := fmtOp(*e.src)
		if e.src.Replayed {
			meta += " (replayed)"
		}
		if e.src.OpID != "" {
			meta += " op_id " + e.src.OpID
		}
		s.ops = append(s.ops, porcupine.Operation{
			ClientId: c.id(*e.src, e.unknown),
			Input:    e.in,
			Call:     e.call,
			Output:   e.out,
			Return:   e.ret,
			Metadata: meta,
		})
		s.src = append(s.src, e.src)
		if !e.unknown {
			s.from = min(s.from, e.call)
			s.to = max(s.to, e.ret)
		}
	}
	return s
}

// cuts splits finite entries (sorted by call) at quiescent points after at
// least segTarget entries.
func linCuts(es []linEntry) [][]linEntry {
	var out [][]linEntry
	start := 0
	maxRet := int64(math.MinInt64)
	for i := range es {
		maxRet = max(maxRet, es[i].ret)
		if i+1 < len(es) && i+1-start >= segTarget && maxRet < es[i+1].call {
			out = append(out, es[start:i+1])
			start = i + 1
		}
	}
	return append(out, es[start:])
}

func sortLinEntries(es []linEntry) {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].call != es[j].call {
			return es[i].call < es[j].call
		}
		return es[i].ret < es[j].ret
	})
}

// partitions builds the register and lock histories.
func (h *chkHistory) partitions() []*linPartition {
	var ps []*linPartition
	for _, k := range h.resources {
		if p := h.registerPartition(k); p != nil {
			ps = append(ps, p)
		}
	}
	for _, l := range h.locks {
		if p := h.lockPartition(l); p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

func (h *chkHistory) registerPartition(k chkRes) *linPartition {
	ms, reads, finals, refusals := h.muts[k], h.reads[k], h.finals[k], h.refusals[k]
	if len(ms)+len(reads)+len(finals)+len(refusals) == 0 {
		return nil
	}
	tokens := true
	var vmax uint64
	var maxRet int64
	for _, m := range ms {
		if !m.Fenced {
			tokens = false
		}
		if m.ok {
			vmax = max(vmax, m.Version)
			maxRet = max(maxRet, m.Return)
		}
	}
	for _, r := range reads {
		vmax = max(vmax, r.Version)
		maxRet = max(maxRet, r.Return)
	}
	for _, r := range refusals {
		maxRet = max(maxRet, r.Return)
	}
	if maxRet == math.MaxInt64 {
		maxRet-- // an op taken as returning at +inf (malformed)
	}
	for _, f := range finals {
		vmax = max(vmax, f.Version)
	}
	// gaps[v]: no OK mutation reports version v; gapsUpTo[v]: how many
	// gaps in 1..v
	gaps := make([]bool, vmax+1)
	for v := uint64(1); v <= vmax; v++ {
		gaps[v] = true
	}
	for _, m := range ms {
		for _, v := range m.vers {
			if v <= vmax {
				gaps[v] = false
			}
		}
	}
	gapsUpTo := make([]int, vmax+1)
	for v := uint64(1); v <= vmax; v++ {
		gapsUpTo[v] = gapsUpTo[v-1]
		if gaps[v] {
			gapsUpTo[v]++
		}
	}

	var finite, unknown []linEntry
	for _, m := range ms {
		in := regInput{kind: m.Kind, token: m.Token, value: m.Value, fenced: m.Fenced, unknown: !m.ok}
		if !m.ok {
			unknown = append(unknown, linEntry{src: &m.Op, call: m.call, ret: math.MaxInt64, in: in, unknown: true})
			continue
		}
		out := regOutput{value: m.ResValue, last: m.LastToken, version: m.Version}
		finite = append(finite, linEntry{src: &m.Op, call: m.call, ret: max(m.Return, m.call), in: in, out: out, ver: m.Version})
	}
	for _, r := range reads {
		finite = append(finite, linEntry{src: r, call: r.Call, ret: max(r.Return, r.Call), in: regInput{kind: KindRead},
			out: regOutput{value: r.ResValue, last: r.LastToken, version: r.Version}, ver: r.Version})
	}
	if tokens {
		// a register with plain writes tracks no token to compare with
		for _, r := range refusals {
			finite = append(finite, linEntry{src: r, call: r.Call, ret: max(r.Return, r.Call),
				in:  regInput{kind: r.Kind, token: r.Token, value: r.Value, fenced: true, refused: true},
				out: regOutput{last: r.LastToken}, refusal: true})
		}
	}
	for _, f := range finals {
		// the final read comes after everything that returned
		call := max(f.Call, maxRet+1)
		finite = append(finite, linEntry{src: f, call: call, ret: max(f.Return, call), in: regInput{kind: KindFinal},
			out: regOutput{value: f.ResValue, last: f.LastToken, version: f.Version}, ver: f.Version})
	}
	sortLinEntries(finite)
	sortLinEntries(unknown)

	p := &linPartition{name: "register " + k.String(), nOps: len(finite) + len(unknown)}
	st := regState{Known: true} // every resource starts as 0, token 0, version 0
	segs := linCuts(finite)
	for i, seg := range segs {
		// the state at the largest version the segment observes
		end, vEnd := st, st.Ver
		var def *linEntry
		refusal := false
		for j := range seg {
			e := &seg[j]
			if e.refusal {
				refusal = true
				continue // observes the last token only
			}
			if e.ver < vEnd {
				continue
			}
			isRead := e.in.(regInput).kind == KindRead || e.in.(regInput).kind == KindFinal
			if e.ver > vEnd || def == nil || isRead {
				vEnd, def = e.ver, e
			}
		}
		if def != nil {
			in, out := def.in.(regInput), def.out.(regOutput)
			end = regState{Ver: vEnd, Known: true, Value: out.value, Last: st.Last}
			switch {
			case in.kind == KindRead || in.kind == KindFinal:
				end.Last = out.last
			case in.kind == KindWrite:
				end.Value = in.value
			}
			if in.kind != KindRead && in.kind != KindFinal && in.fenced {
				end.Last = in.token
			}
			if !tokens {
				end.Last = 0
			}
		}
		es := append([]linEntry(nil), seg...)
		segEnd := int64(math.MaxInt64)
		if i+1 < len(segs) {
			segEnd = segs[i+1][0].call
		}
		// A refusal observes the last token but no version: one late in
		// the segment may have seen the token of an unknown mutation that
		// applied at a version only a later segment observes. Such a
		// segment lets unknown mutations fill gaps up to the partition's
		// largest version (after every versioned op of the segment).
		vTop := vEnd
		if refusal {
			vTop = vmax
		}
		if vTop > st.Ver && gapsUpTo[vTop]-gapsUpTo[st.Ver] > 0 {
			for _, u := range unknown {
				if u.call >= segEnd {
					break
				}
				if in := u.in.(regInput); tokens && in.fenced && in.token < st.Last {
					continue // can never apply again
				}
				es = append(es, u)
			}
		}
		p.segs = append(p.segs, newLinSegment(registerModel(st, gaps, vEnd, vTop, tokens), es))
		st = end
	}
	return p
}

func (h *chkHistory) lockPartition(l string) *linPartition {
	los := h.lockOps[l]
	if len(los) == 0 {
		return nil
	}
	var es []linEntry
	for _, o := range los {
		es = append(es, linEntry{src: o, call: o.Call, ret: max(o.Return, o.Call), in: lockInput{acquire: o.Kind == KindAcquire, token: o.Token, shared: !o.exclusive(), loose: o.Kind == KindRelease && (!o.Session || o.restoredLease)}})
	}
	sortLinEntries(es)
	p := &linPartition{name: "lock " + l, nOps: len(es)}
	st := lockState{}
	for _, seg := range linCuts(es) {
		p.segs = append(p.segs, newLinSegment(lockModel(st), seg))
		// acquires linearize in token order (each exclusive one makes
		// its token the only holder), then the acknowledged releases
		end := st
		var acqs []lockInput
		for _, e := range seg {
			if in := e.in.(lockInput); in.acquire && in.token > end.Max {
				acqs = append(acqs, in)
			}
		}
		sort.Slice(acqs, func(i, j int) bool { return acqs[i].token < acqs[j].token })
		for _, in := range acqs {
			_, end = lockStep(end, in)
		}
		for _, e := range seg {
			if in := e.in.(lockInput); !in.acquire {
				in.loose = true
				_, end = lockStep(end, in)
			}
		}
		st = end
	}
	return p
}

// fileName is the partition's name as a file name: linear-<partition>.html.
func (p *linPartition) fileName() string {
	s := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, p.name)
	return "linear-" + s + ".html"
}

type linResult struct {
	ok       bool
	detail   string
	problems []string
	files    []string
}

type partResult struct {
	p       *linPartition
	res     porcupine.CheckResult
	elapsed time.Duration
	problem string
	file    string
}

// checkLinear runs porcupine on every partition, a few at a time.
func checkLinear(h *chkHistory, outDir string, timeout time.Duration) linResult {
	ps := h.partitions()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	results := make([]partResult, len(ps))
	par := min(runtime.GOMAXPROCS(0), 4)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = checkPartition(p, outDir, deadline, timeout)
		}()
	}
	wg.Wait()

	lr := linResult{ok: true}
	var bad, timedOut []string
	nOps, nSegs := 0, 0
	for _, r := range results {
		nOps += r.p.nOps
		nSegs += len(r.p.segs)
		switch r.res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			lr.ok = false
			timedOut = append(timedOut, fmt.Sprintf("%s (%d ops)", r.p.name, r.p.nOps))
			lr.problems = append(lr.problems, r.problem)
		default:
			lr.ok = false
			bad = append(bad, r.p.name)
			lr.problems = append(lr.problems, r.problem)
			if r.file != "" {
				lr.files = append(lr.files, r.file)
			}
		}
	}
	if lr.ok {
		lr.detail = fmt.Sprintf("linearizable: %d partitions (%d segments), %d ops", len(ps), nSegs, nOps)
		return lr
	}
	var parts []string
	if len(bad) > 0 {
		parts = append(parts, "not linearizable: "+strings.Join(bad, ", "))
	}
	if len(timedOut) > 0 {
		parts = append(parts, fmt.Sprintf("timed out on partition %s (limit %v for all)", strings.Join(timedOut, ", "), timeout))
	}
	lr.detail = strings.Join(parts, "; ")
	return lr
}

// checkPartition checks the segments in order until the deadline (zero:
// none) and stops at the first that fails.
func checkPartition(p *linPartition, outDir string, deadline time.Time, timeout time.Duration) partResult {
	start := time.Now()
	r := partResult{p: p, res: porcupine.Ok}
	left := func() time.Duration {
		if deadline.IsZero() {
			return 0
		}
		return max(time.Until(deadline), time.Nanosecond)
	}
	for i, s := range p.segs {
		res := porcupine.CheckOperationsTimeout(s.model, s.ops, left())
		r.elapsed = time.Since(start)
		where := ""
		if len(p.segs) > 1 {
			where = fmt.Sprintf(", segment %d of %d: %d ops %s–%s", i+1, len(p.segs), len(s.ops), fmtClock(s.from), fmtClock(s.to))
		}
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			r.res = res
			r.problem = fmt.Sprintf("linearizability: timed out on partition %s (%d ops%s) after %v",
				p.name, p.nOps, where, r.elapsed.Round(time.Millisecond))
			return r
		}
		r.res = res
		r.problem = fmt.Sprintf("not linearizable: %s (%d ops%s)", p.name, p.nOps, where)
		// again, verbosely, for the visualisation and the op it got stuck
		// on (given at least 10s, or the whole limit if shorter)
		vt := left()
		if timeout > 0 {
			vt = max(vt, min(timeout, 10*time.Second))
		}
		vres, info := porcupine.CheckOperationsVerbose(s.model, s.ops, vt)
		if vres == porcupine.Illegal {
			if stuck, n, ok := stuckOp(s, info); ok {
				r.problem += fmt.Sprintf(": longest linearizable prefix has %d ops; cannot place %s %s (%s)",
					n, fmtOp(*s.src[stuck]), s.model.DescribeOperation(s.ops[stuck].Input, s.ops[stuck].Output), fmtSpan(*s.src[stuck]))
			}
		}
		if outDir != "" {
			path := filepath.Join(outDir, p.fileName())
			if err := linVisualize(s.model, info, path); err != nil {
				r.problem += fmt.Sprintf(" (visualisation failed: %v)", err)
			} else {
				r.file = path
				r.problem += " — see " + path
			}
		}
		return r
	}
	return r
}

// stuckOp finds, beyond the longest partial linearization, the op that
// returned first: the one no linearization could fit in.
func stuckOp(s *linSegment, info porcupine.LinearizationInfo) (int, int, bool) {
	pls := info.PartialLinearizations()
	if len(pls) == 0 {
		return 0, 0, false
	}
	var longest []int
	for _, l := range pls[0] {
		if len(l) > len(longest) {
			longest = l
		}
	}
	in := make([]bool, len(s.ops))
	for _, i := range longest {
		if i >= 0 && i < len(in) {
			in[i] = true
		}
	}
	cand := make([]int, 0, len(s.ops))
	for i := range s.ops {
		if !in[i] {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return 0, 0, false
	}
	sort.SliceStable(cand, func(a, b int) bool { return s.ops[cand[a]].Return < s.ops[cand[b]].Return })
	return cand[0], len(longest), true
}

func linVisualize(m porcupine.Model, info porcupine.LinearizationInfo, path string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("porcupine: %v", r)
		}
	}()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return porcupine.VisualizePath(m, info, path)
}
