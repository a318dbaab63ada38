package server

import (
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// The activity ring (OperatorService.Activity): what this node did over
// the last activitySteps × activityStep (15 minutes in 5 s steps), kept in
// memory so the operator page draws its charts with no Prometheus. Per
// step: the grants it applied (from the applied changes, as the story is
// fed: the cluster's grants, the same on every member), the refusals it
// answered by reason, and the latency of the acquires it answered with a
// grant, as a histogram of log-linear buckets (4 a power of two: a
// percentile is a bucket's upper bound, at most 25% above the true value).
// Recording is a few atomic adds (none on a nil ring: the benchmarks'
// "without"); a step's slot is cleared by the first
// record (or read) that finds it holding an older step.
const (
	activityStep  = 5 * time.Second
	activitySteps = 180
	// latencyBuckets covers 0 µs to 2^41 µs (25 days) in 4 buckets a
	// power of two; longer is counted in the last.
	latencyBuckets = 4 * 42
)

// activitySlot is one step's counts.
type activitySlot struct {
	step     atomic.Int64 // the step it holds (Unix ms / step); 0: none yet
	grants   atomic.Uint32
	acquires atomic.Uint32
	latency  [latencyBuckets]atomic.Uint32
	refusals sync.Map // reason → *atomic.Uint32
}

type activityRing struct {
	mu    sync.Mutex // serialises clearing a slot
	slots [activitySteps]activitySlot
	now   func() time.Time
}

func newActivityRing(now func() time.Time) *activityRing { return &activityRing{now: now} }

func stepOf(t time.Time) int64 { return t.UnixMilli() / activityStep.Milliseconds() }

// slot is the slot of step, cleared first if it holds an older one; nil if
// it holds a newer one (a record that was late by 15 minutes).
func (r *activityRing) slot(step int64) *activitySlot {
	s := &r.slots[step%activitySteps]
	if s.step.Load() == step {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch cur := s.step.Load(); {
	case cur == step:
	case cur > step:
		return nil
	default:
		s.grants.Store(0)
		s.acquires.Store(0)
		for i := range s.latency {
			s.latency[i].Store(0)
		}
		s.refusals.Range(func(k, _ any) bool { s.refusals.Delete(k); return true })
		s.step.Store(step)
	}
	return s
}

// granted counts n grants applied now.
func (r *activityRing) granted(n int) {
	if r == nil {
		return
	}
	if s := r.slot(stepOf(r.now())); s != nil {
		s.grants.Add(uint32(n))
	}
}

// acquired counts an acquire answered with a grant after d.
func (r *activityRing) acquired(d time.Duration) {
	if r == nil {
		return
	}
	if s := r.slot(stepOf(r.now())); s != nil {
		s.acquires.Add(1)
		s.latency[latencyBucket(d)].Add(1)
	}
}

// refused counts a refusal answered for reason.
func (r *activityRing) refused(reason string) {
	if r == nil {
		return
	}
	s := r.slot(stepOf(r.now()))
	if s == nil {
		return
	}
	c, ok := s.refusals.Load(reason)
	if !ok {
		c, _ = s.refusals.LoadOrStore(reason, new(atomic.Uint32))
	}
	c.(*atomic.Uint32).Add(1)
}

// latencyBucket is d's bucket: microseconds 0-3 their own; above, 4 a
// power of two (the top two bits after the leading one).
func latencyBucket(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 0))
	if us < 4 {
		return int(us)
	}
	e := bits.Len64(us) - 1 // 2 ≤ e
	i := 4*(e-1) + int(us>>(e-2)&3)
	return min(i, latencyBuckets-1)
}

// bucketUpper is the largest latency (µs) bucket i holds.
func bucketUpper(i int) uint64 {
	if i < 4 {
		return uint64(i)
	}
	e := i/4 + 1
	sub := uint64(i % 4)
	return (4+sub+1)<<(e-2) - 1
}

// activityPoint is one step as read.
type activityPoint struct {
	at               int64 // Unix ms of the step's start
	grants, acquires uint32
	p50, p99         uint32 // µs
	refusals         map[string]uint32
}

// points are the last activitySteps steps, oldest first, the last being
// the one under way.
func (r *activityRing) points() []activityPoint {
	cur := stepOf(r.now())
	out := make([]activityPoint, activitySteps)
	for k := range out {
		step := cur - activitySteps + 1 + int64(k)
		p := &out[k]
		p.at = step * activityStep.Milliseconds()
		s := &r.slots[((step%activitySteps)+activitySteps)%activitySteps]
		if s.step.Load() != step {
			continue
		}
		p.grants, p.acquires = s.grants.Load(), s.acquires.Load()
		var hist [latencyBuckets]uint32
		var n uint64
		for i := range hist {
			hist[i] = s.latency[i].Load()
			n += uint64(hist[i])
		}
		p.p50, p.p99 = percentile(hist[:], n, 50), percentile(hist[:], n, 99)
		s.refusals.Range(func(k, v any) bool {
			if c := v.(*atomic.Uint32).Load(); c > 0 {
				if p.refusals == nil {
					p.refusals = map[string]uint32{}
				}
				p.refusals[k.(string)] = c
			}
			return true
		})
	}
	return out
}

// percentile is the upper bound (µs, at most MaxUint32) of the bucket
// holding the q-th percentile of the n latencies of hist; 0 when n is 0.
func percentile(hist []uint32, n uint64, q uint64) uint32 {
	if n == 0 {
		return 0
	}
	rank := (n*q + 99) / 100 // the rank-th smallest, 1-based
	var seen uint64
	for i, c := range hist {
		seen += uint64(c)
		if seen >= rank {
			return uint32(min(bucketUpper(i), 1<<32-1))
		}
	}
	return uint32(min(bucketUpper(len(hist)-1), 1<<32-1))
}

// sortedReasons is m's reasons, sorted.
func sortedReasons(m map[string]uint32) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
