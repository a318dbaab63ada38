package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLinearStaleReadWritesVisualization(t *testing.T) {
	dir := t.TempDir()
	rd := Op{Worker: 3, Kind: KindRead, Store: StoreFence, Res: "stock/sku-0", Call: 50, Return: 60,
		ResValue: 9, LastToken: 5, Version: 1} // version 2 had returned at 40
	b := (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20)).add(ckWrite(2, 6, 8, 2, 30, 40)).add(rd).add(ckFinal(77, 6, 3, 100))
	b.add(ckUnknownWrite(4, 6, 77, 45)) // version 3: drawn up to +inf
	r := Check(b.ops, dir, time.Minute)
	if r.Linearizable || r.StaleAccepted+r.TokensRegressed+r.Overlaps+r.LostWrites+r.DoubleApplies != 0 {
		t.Fatalf("%+v", r)
	}
	want := filepath.Join(dir, "linear-register_fence_stock_sku-0.html")
	if len(r.Visualizations) != 1 || r.Visualizations[0] != want {
		t.Fatalf("visualizations %q, want %q", r.Visualizations, want)
	}
	html, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "<html") || !strings.Contains(string(html), "w3#1") || !strings.Contains(string(html), "w4#1") {
		t.Fatalf("not porcupine's visualisation of this history (%d bytes)", len(html))
	}
	if !strings.Contains(r.LinearDetail, "not linearizable: register fence:stock/sku-0") {
		t.Fatalf("detail %q", r.LinearDetail)
	}
	p := strings.Join(r.Problems, "\n")
	if !strings.Contains(p, "cannot place w3#1 read → 9 (token 5, ver 1)") || !strings.Contains(p, "see "+want) {
		t.Fatalf("problems %q", r.Problems)
	}
	// the same read before the second write returned is linearizable
	b.ops[2].Call, b.ops[2].Return = 25, 35
	r = Check(b.ops, dir, time.Minute)
	ckMustOK(t, r)
	if len(r.Visualizations) != 0 {
		t.Fatal(r.Visualizations)
	}
}

func ckUnknownWrite(w int, tok uint64, val int64, call int64) Op {
	o := ckWrite(w, tok, val, 0, call, 0)
	o.Out, o.LastToken = OutcomeUnknown, 0
	return o
}

func TestLinearUnknownMutations(t *testing.T) {
	cases := []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"never applied", []Op{ckWrite(1, 5, 9, 1, 10, 20), ckUnknownWrite(2, 6, 7, 30), ckFinal(9, 5, 1, 100)}, true},
		{"applied", []Op{ckWrite(1, 5, 9, 1, 10, 20), ckUnknownWrite(2, 6, 7, 30), ckFinal(7, 6, 2, 100)}, true},
		{"applied between", []Op{ckWrite(1, 5, 9, 1, 10, 20), ckUnknownWrite(2, 6, 7, 30), ckWrite(1, 6, 4, 3, 50, 60), ckFinal(4, 6, 3, 100)}, true},
		// the unknown write was called after version 2 returned, so it
		// cannot have taken version 2
		{"applied before its call", []Op{ckWrite(1, 5, 9, 1, 10, 20), ckWrite(1, 6, 4, 3, 50, 60), ckUnknownWrite(2, 6, 7, 70), ckFinal(4, 6, 3, 100)}, false},
		// token 3 is below the last token 5: it cannot have applied
		{"stale cannot apply", []Op{ckWrite(1, 5, 9, 1, 10, 20), ckUnknownWrite(2, 3, 42, 30), ckFinal(42, 5, 2, 100)}, false},
		{"stale cannot apply 2", []Op{ckWrite(1, 5, 9, 1, 10, 20), ckUnknownWrite(2, 3, 42, 30), ckFinal(42, 3, 2, 100)}, false},
		// nor explain a value no mutation wrote
		{"unexplained value", []Op{ckWrite(1, 5, 9, 1, 10, 20), ckUnknownWrite(2, 6, 7, 30), ckFinal(8, 6, 2, 100)}, false},
		// every resource starts at 0
		{"initial value", []Op{ckAdd(1, 5, 5, 5, 1, "a", 10, 20), ckFinal(5, 5, 1, 100)}, true},
		{"initial value not 0", []Op{ckAdd(1, 5, 5, 105, 1, "a", 10, 20), ckFinal(105, 5, 1, 100)}, false},
	}
	for _, c := range cases {
		b := &ckHist{}
		for _, o := range c.ops {
			b.add(o)
		}
		r := Check(b.ops, t.TempDir(), time.Minute)
		if r.Linearizable != c.ok {
			t.Errorf("%s: linearizable %v, want %v: %s", c.name, r.Linearizable, c.ok, strings.Join(r.Problems, "\n"))
		}
	}
}

// The harness's final read is placed after everything that returned, even
// if its own call time is a little earlier.
func TestLinearFinalIsLast(t *testing.T) {
	b := (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20)).add(ckWrite(1, 5, 8, 2, 30, 40)).add(ckFinal(8, 5, 2, 35))
	ckMustOK(t, Check(b.ops, "", 0))
	b = (&ckHist{}).add(ckWrite(1, 5, 9, 1, 10, 20)).add(ckWrite(1, 5, 8, 2, 30, 40)).add(ckFinal(9, 5, 1, 35))
	if r := Check(b.ops, "", 0); r.Linearizable {
		t.Fatalf("%+v", r)
	}
}

func TestLinearLocks(t *testing.T) {
	cases := []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"hand-off", []Op{ckAcquire(1, "sku-0", 5, 10, 20), ckRelease(1, "sku-0", 5, 20, 30, 30, 40), ckAcquire(2, "sku-0", 6, 35, 50), ckRelease(2, "sku-0", 6, 50, 60, 60, 70)}, true},
		// the first lease expired (its release was refused) before
		// the second grant
		{"expiry", []Op{ckAcquire(1, "sku-0", 5, 10, 20), ckAcquire(2, "sku-0", 6, 30, 50),
			func() Op { o := ckRelease(1, "sku-0", 5, 20, 25, 60, 70); o.Out = OutcomeStale; return o }()}, true},
		// a release acknowledged after another grant had returned: the
		// lock was granted while held, or the release lied
		// (a session's release: exactly once by seq, so its OK is strict)
		{"release after regrant", []Op{ckAcquire(1, "sku-0", 5, 10, 20), ckAcquire(2, "sku-0", 6, 30, 40), onSession(ckRelease(1, "sku-0", 5, 20, 25, 50, 60))}, false},
		{"release of a token never held", []Op{ckAcquire(1, "sku-0", 5, 10, 20), onSession(ckRelease(2, "sku-0", 4, 20, 25, 30, 40))}, false},
		// a standalone release's OK may be client.Release's retry finding
		// the token already gone (expired, the lock moved on): allowed
		{"standalone release after regrant", []Op{ckAcquire(1, "sku-0", 5, 10, 20), ckAcquire(2, "sku-0", 6, 30, 40), ckRelease(1, "sku-0", 5, 20, 25, 50, 60)}, true},
		// ... but it frees the lock only if it was the holder: a later
		// strict release by the real holder still checks out, and tokens
		// must still grow
		{"standalone release then stale grant", []Op{ckAcquire(1, "sku-0", 5, 10, 20), ckAcquire(2, "sku-0", 6, 30, 40), ckRelease(1, "sku-0", 5, 20, 25, 50, 60), ckAcquire(3, "sku-0", 4, 70, 80)}, false},
		// a release retried after a lost reply is one op
		{"retried release", []Op{ckAcquire(1, "sku-0", 5, 10, 20), ckRelease(1, "sku-0", 5, 20, 30, 30, 90), ckAcquire(2, "sku-0", 6, 40, 50)}, true},
	}
	for _, c := range cases {
		b := &ckHist{}
		for _, o := range c.ops {
			b.add(o)
		}
		dir := t.TempDir()
		r := Check(b.ops, dir, time.Minute)
		if r.Linearizable != c.ok {
			t.Errorf("%s: linearizable %v, want %v: %s", c.name, r.Linearizable, c.ok, strings.Join(r.Problems, "\n"))
		}
		if !c.ok {
			if _, err := os.Stat(filepath.Join(dir, "linear-lock_sku-0.html")); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	}
}

func TestLinearTimeout(t *testing.T) {
	ops := ckSimulate(ckSimConfig{seed: 3, ops: 20000, locks: 1, stores: []string{StoreFence}})
	r := Check(ops, t.TempDir(), time.Nanosecond)
	if r.Linearizable || !strings.Contains(r.LinearDetail, "timed out on partition") || len(r.Visualizations) != 0 {
		t.Fatalf("%+v", r)
	}
}

// 20,000 ops of the workload (sequential per lock, concurrent across
// locks, some unknown outcomes) check in a few seconds.
func TestLinear20kOps(t *testing.T) {
	ops := ckSimulate(ckSimConfig{seed: 9, ops: 20000, workers: 8, locks: 4, unknownP: 0.02, pauseP: 0.02, tryP: 0.2})
	start := time.Now()
	r := Check(ops, t.TempDir(), 2*time.Minute)
	t.Logf("%d ops checked in %v: %s", len(ops), time.Since(start), r.LinearDetail)
	ckMustOK(t, r)
}

// withSegments runs f with partitions cut every n ops (where quiescent).
func ckWithSegments(t *testing.T, n int, f func()) {
	old := segTarget
	segTarget = n
	defer func() { segTarget = old }()
	f()
}

// Cutting partitions into small segments changes no verdict: the clean
// histories (with unknown outcomes crossing cuts) stay clean and every
// planted bug is still caught.
func TestLinearSegmentsSameVerdicts(t *testing.T) {
	for _, n := range []int{3, 17, 100} {
		ckWithSegments(t, n, func() {
			for seed := uint64(1); seed <= 10; seed++ {
				ops := ckSimulate(ckSimConfig{seed: seed, ops: 1500, unknownP: 0.15, pauseP: 0.1, tryP: 0.2})
				r := Check(ops, t.TempDir(), 0)
				if !r.OK() {
					t.Fatalf("segments of %d, seed %d: %+v\n%s", n, seed, r, strings.Join(r.Problems, "\n"))
				}
				if !strings.Contains(r.LinearDetail, "segments") || strings.Contains(r.LinearDetail, "12 partitions (12 segments)") {
					t.Fatalf("not cut: %s", r.LinearDetail)
				}
			}
			for name, cfg := range map[string]ckSimConfig{
				"stale read":   {bugStaleRead: 0.01},
				"lost write":   {bugLostWrite: 0.01},
				"double add":   {bugDoubleAdd: 0.05},
				"stale accept": {pauseP: 0.2, bugStaleAccept: 1},
			} {
				for _, r := range ckPlanted(t, cfg, 3) {
					if r.Linearizable {
						t.Fatalf("segments of %d: %s not caught by checker 6: %+v", n, name, r)
					}
				}
			}
		})
	}
}

// An unknown mutation called early may fill a version gap several
// segments later; a stale unknown one may not.
func TestLinearSegmentsUnknownAcrossCuts(t *testing.T) {
	build := func(unknownTok uint64, finalVal int64, finalTok uint64) []Op {
		b := &ckHist{}
		b.add(ckWrite(1, 5, 100, 1, 10, 20))
		b.add(ckUnknownWrite(2, unknownTok, 42, 25)) // may land any time after 25
		at := int64(30)
		for v := uint64(2); v <= 20; v++ {
			b.add(ckWrite(1, 6, int64(100+v), v, at, at+5))
			at += 10
		}
		// version 21 is nobody's: only the unknown write can have taken it
		b.add(ckFinal(finalVal, finalTok, 21, at+100))
		return b.ops
	}
	ckWithSegments(t, 2, func() {
		r := Check(build(6, 42, 6), t.TempDir(), 0)
		if !r.OK() {
			t.Fatalf("%+v", r)
		}
		if !strings.Contains(r.LinearDetail, "segments") || strings.Contains(r.LinearDetail, "(1 segments)") {
			t.Fatalf("not cut: %s", r.LinearDetail)
		}
		// token 5 is below token 6, accepted from version 2 on
		if r := Check(build(5, 42, 5), t.TempDir(), 0); r.Linearizable {
			t.Fatalf("stale unknown write applied at the end: %+v", r)
		}
		// value 43 was never written
		if r := Check(build(6, 43, 6), t.TempDir(), 0); r.Linearizable {
			t.Fatalf("%+v", r)
		}
	})
}

// The lock state carried over a cut: a release acknowledged after the next
// grant, in a later segment than both grants.
func TestLinearSegmentsLockState(t *testing.T) {
	ckWithSegments(t, 1, func() {
		ok := (&ckHist{}).add(ckAcquire(1, "sku-0", 5, 10, 20)).add(ckRelease(1, "sku-0", 5, 20, 30, 30, 40)).
			add(ckAcquire(2, "sku-0", 6, 50, 60)).add(ckRelease(2, "sku-0", 6, 60, 70, 70, 80))
		if r := Check(ok.ops, t.TempDir(), 0); !r.OK() || !strings.Contains(r.LinearDetail, "(4 segments)") {
			t.Fatalf("%+v", r)
		}
		bad := (&ckHist{}).add(ckAcquire(1, "sku-0", 5, 10, 20)).add(ckAcquire(2, "sku-0", 6, 30, 40)).add(onSession(ckRelease(1, "sku-0", 5, 20, 25, 50, 60)))
		dir := t.TempDir()
		r := Check(bad.ops, dir, 0)
		if r.Linearizable || !strings.Contains(r.Problems[0], "segment 3 of 3") {
			t.Fatalf("%+v", r)
		}
		if _, err := os.Stat(filepath.Join(dir, "linear-lock_sku-0.html")); err != nil {
			t.Fatal(err)
		}
		// a token below one granted in an earlier segment
		back := (&ckHist{}).add(ckAcquire(1, "sku-0", 5, 10, 20)).add(ckRelease(1, "sku-0", 5, 20, 25, 30, 40)).add(ckAcquire(2, "sku-0", 4, 50, 60))
		if r := Check(back.ops, t.TempDir(), 0); r.Linearizable {
			t.Fatalf("%+v", r)
		}
	})
}

// BenchmarkCheck300k: a long run's history (300,000 ops of 8 workers on 4
// locks and two stores, 2% unknown outcomes).
func BenchmarkCheck300k(b *testing.B) {
	ops := ckSimulate(ckSimConfig{seed: 1, ops: 300000, workers: 8, locks: 4, unknownP: 0.02, pauseP: 0.02, tryP: 0.2})
	b.ResetTimer()
	for range b.N {
		if r := Check(ops, b.TempDir(), 5*time.Minute); !r.OK() {
			b.Fatalf("%+v", r)
		}
	}
}

func onSession(o Op) Op { o.Session = true; return o }
