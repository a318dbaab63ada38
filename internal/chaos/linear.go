package chaos

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Checker 6: linearizability with porcupine, one partition per register
// (store, resource) and one per lock, each with its own small model.
//
// Register model. State: value, last token, version (and whether the value
// is known yet: a store may start with a value the history never wrote).
// A read (or the harness's final read) must see exactly the state. An OK
// fenced write or add is allowed iff its token is at least the last token;
// it sets the last token to its own, and its version must be the state's
// plus one (and its reported value/last token must match). A plain write
// (the control run's, Fenced false) applies whatever its token; a register
// with plain writes does not track tokens at all.
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
// Lock model. State: holder token (0: none) and the largest token granted.
// An OK acquire needs a token above every token granted before it in the
// linearization and makes it the holder; an OK release needs its token to be
// the holder and frees the lock. A holder may vanish at any time (its lease
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
}

type lockState struct {
	Holder uint64
	Max    uint64
}

func mix(h, v uint64) uint64 {
	h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
	return h
}

// registerModel builds the model of one register. gaps[v] is true for the
// versions 1..vmax that no OK mutation reports; tokens is false for a
// register with plain writes.
func registerModel(gaps []bool, vmax uint64, tokens bool) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return regState{} },
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
			allowed := !tokens || !i.fenced || i.token >= st.Last
			if i.unknown {
				if st.Ver >= vmax {
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
			h := mix(uint64(st.Value), st.Last)
			h = mix(h, st.Ver)
			if st.Known {
				h = mix(h, 1)
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

func lockModel() porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return lockState{} },
		Step: func(s, in, _ interface{}) (bool, interface{}) {
			st := s.(lockState)
			i := in.(lockInput)
			if i.acquire {
				if i.token <= st.Max {
					return false, st
				}
				return true, lockState{Holder: i.token, Max: i.token}
			}
			if st.Holder != i.token {
				return false, st
			}
			st.Holder = 0
			return true, st
		},
		Hash: func(s interface{}) uint64 {
			st := s.(lockState)
			return mix(st.Holder, st.Max)
		},
		DescribeOperation: func(in, _ interface{}) string {
			i := in.(lockInput)
			if i.acquire {
				return fmt.Sprintf("acquire → token %d", i.token)
			}
			return fmt.Sprintf("release token %d → ok", i.token)
		},
		DescribeState: func(s interface{}) string {
			st := s.(lockState)
			if st.Holder == 0 {
				return fmt.Sprintf("free (max token %d)", st.Max)
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

// partition is one porcupine history with its model.
type partition struct {
	name  string
	model porcupine.Model
	ops   []porcupine.Operation
	src   []Op // the Op behind each operation
}

// clients gives each (worker, unknown) pair its own row in a visualisation.
type clients map[[2]int]int

func (c clients) id(o Op, unknown bool) int {
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

func (p *partition) add(c clients, o Op, call, ret int64, in, out interface{}, unknown bool) {
	if ret < call {
		ret = call
	}
	meta := opName(o)
	if o.Replayed {
		meta += " (replayed)"
	}
	if o.OpID != "" {
		meta += " op_id " + o.OpID
	}
	p.ops = append(p.ops, porcupine.Operation{
		ClientId: c.id(o, unknown),
		Input:    in,
		Call:     call,
		Output:   out,
		Return:   ret,
		Metadata: meta,
	})
	p.src = append(p.src, o)
}

// partitions builds the register and lock histories.
func (h *history) partitions() []*partition {
	var ps []*partition
	for _, k := range h.resources {
		ms := h.muts[k]
		reads := h.reads[k]
		finals := h.finals[k]
		if len(ms)+len(reads)+len(finals) == 0 {
			continue
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
		for _, f := range finals {
			vmax = max(vmax, f.Version)
		}
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
		p := &partition{name: "register " + k.String(), model: registerModel(gaps, vmax, tokens)}
		c := clients{}
		for _, m := range ms {
			in := regInput{kind: m.Kind, token: m.Token, value: m.Value, fenced: m.Fenced, unknown: !m.ok}
			if !m.ok {
				p.add(c, m.Op, m.call, math.MaxInt64, in, nil, true)
				continue
			}
			out := regOutput{value: m.ResValue, last: m.LastToken, version: m.Version}
			p.add(c, m.Op, m.call, m.Return, in, out, false)
		}
		for _, r := range reads {
			p.add(c, r, r.Call, r.Return, regInput{kind: KindRead}, regOutput{value: r.ResValue, last: r.LastToken, version: r.Version}, false)
		}
		for _, f := range finals {
			// the final read comes after everything that returned
			call := max(f.Call, maxRet+1)
			p.add(c, f, call, max(f.Return, call), regInput{kind: KindFinal}, regOutput{value: f.ResValue, last: f.LastToken, version: f.Version}, false)
		}
		ps = append(ps, p)
	}
	for _, l := range h.locks {
		los := h.lockOps[l]
		if len(los) == 0 {
			continue
		}
		p := &partition{name: "lock " + l, model: lockModel()}
		c := clients{}
		for _, o := range los {
			p.add(c, o, o.Call, o.Return, lockInput{acquire: o.Kind == KindAcquire, token: o.Token}, nil, false)
		}
		ps = append(ps, p)
	}
	return ps
}

// fileName is the partition's name as a file name: linear-<partition>.html.
func (p *partition) fileName() string {
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
	p       *partition
	res     porcupine.CheckResult
	elapsed time.Duration
	problem string
	file    string
}

// checkLinear runs porcupine on every partition, a few at a time.
func checkLinear(h *history, outDir string, timeout time.Duration) linResult {
	ps := h.partitions()
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
			results[i] = checkPartition(p, outDir, timeout)
		}()
	}
	wg.Wait()

	var lr linResult
	lr.ok = true
	var bad, timedOut []string
	nOps := 0
	for _, r := range results {
		nOps += len(r.p.ops)
		switch r.res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			lr.ok = false
			timedOut = append(timedOut, fmt.Sprintf("%s (%d ops)", r.p.name, len(r.p.ops)))
			lr.problems = append(lr.problems, fmt.Sprintf("linearizability: timed out on partition %s (%d ops) after %v", r.p.name, len(r.p.ops), r.elapsed.Round(time.Millisecond)))
		default:
			lr.ok = false
			bad = append(bad, r.p.name)
			lr.problems = append(lr.problems, r.problem)
			if r.file != "" {
				lr.files = append(lr.files, r.file)
			}
		}
	}
	switch {
	case lr.ok:
		lr.detail = fmt.Sprintf("linearizable: %d partitions, %d ops", len(ps), nOps)
	default:
		var parts []string
		if len(bad) > 0 {
			parts = append(parts, "not linearizable: "+strings.Join(bad, ", "))
		}
		if len(timedOut) > 0 {
			parts = append(parts, fmt.Sprintf("timed out on partition %s (limit %v)", strings.Join(timedOut, ", "), timeout))
		}
		lr.detail = strings.Join(parts, "; ")
	}
	return lr
}

func checkPartition(p *partition, outDir string, timeout time.Duration) partResult {
	start := time.Now()
	res := porcupine.CheckOperationsTimeout(p.model, p.ops, timeout)
	r := partResult{p: p, res: res, elapsed: time.Since(start)}
	if res != porcupine.Illegal {
		return r
	}
	// again, verbosely, for the visualisation and the op it got stuck on
	vres, info := porcupine.CheckOperationsVerbose(p.model, p.ops, timeout)
	r.problem = fmt.Sprintf("not linearizable: %s (%d ops)", p.name, len(p.ops))
	if vres == porcupine.Illegal {
		if stuck, n, ok := stuckOp(p, info); ok {
			r.problem += fmt.Sprintf(": longest linearizable prefix has %d ops; cannot place %s %s (%s)",
				n, opName(p.src[stuck]), p.model.DescribeOperation(p.ops[stuck].Input, p.ops[stuck].Output), span(p.src[stuck]))
		}
	}
	if outDir != "" {
		path := filepath.Join(outDir, p.fileName())
		if err := visualize(p.model, info, path); err != nil {
			r.problem += fmt.Sprintf(" (visualisation failed: %v)", err)
		} else {
			r.file = path
			r.problem += " — see " + path
		}
	}
	return r
}

// stuckOp finds, beyond the longest partial linearization, the op that
// returned first: the one no linearization could fit in.
func stuckOp(p *partition, info porcupine.LinearizationInfo) (int, int, bool) {
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
	in := make([]bool, len(p.ops))
	for _, i := range longest {
		if i >= 0 && i < len(in) {
			in[i] = true
		}
	}
	cand := make([]int, 0, len(p.ops))
	for i := range p.ops {
		if !in[i] {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return 0, 0, false
	}
	sort.SliceStable(cand, func(a, b int) bool { return p.ops[cand[a]].Return < p.ops[cand[b]].Return })
	return cand[0], len(longest), true
}

func visualize(m porcupine.Model, info porcupine.LinearizationInfo, path string) (err error) {
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
