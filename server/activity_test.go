package server

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// fakeClock is a settable clock for the ring.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// The ring holds 15 minutes of 5 s steps, oldest first, the last the step
// under way; a step recorded 15 minutes ago is gone, its slot reused.
func TestActivityRingKeepsFifteenMinutesOfSteps(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	r := newActivityRing(clk.now)
	r.granted(3)
	r.refused("BUSY")
	r.acquired(time.Millisecond)
	clk.add(activityStep)
	r.granted(1)
	pts := r.points()
	if len(pts) != activitySteps || pts[len(pts)-1].at != clk.now().UnixMilli() {
		t.Fatalf("%d points, the last at %d; want %d, the last at %d (now)", len(pts), pts[len(pts)-1].at, activitySteps, clk.now().UnixMilli())
	}
	prev, last := pts[len(pts)-2], pts[len(pts)-1]
	if prev.grants != 3 || prev.refusals["BUSY"] != 1 || prev.acquires != 1 || last.grants != 1 || last.acquires != 0 {
		t.Fatalf("the last two steps: %+v, %+v; want 3 grants, 1 BUSY, 1 acquire, then 1 grant", prev, last)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].at-pts[i-1].at != activityStep.Milliseconds() {
			t.Fatalf("points %d and %d are %d ms apart", i-1, i, pts[i].at-pts[i-1].at)
		}
	}
	// 15 minutes on, the first step's slot is the current step's: it
	// starts from zero.
	clk.add(activitySteps*activityStep - activityStep)
	r.granted(7)
	pts = r.points()
	var total uint32
	for _, p := range pts {
		total += p.grants
	}
	if total != 8 || pts[len(pts)-1].grants != 7 || pts[0].grants != 1 {
		t.Fatalf("15 minutes later: %d grants in the ring (last %d, first %d), want 8 (7 now, the 1 of 15 minutes ago at the start)", total, pts[len(pts)-1].grants, pts[0].grants)
	}
	// A record late by 15 minutes (its step's slot now holds a newer
	// step) is dropped, not counted in the newer step.
	if s := r.slot(stepOf(clk.now().Add(-activitySteps * activityStep))); s != nil {
		t.Fatalf("a record 15 minutes late got the slot of step %d", s.step.Load())
	}
	clk.add(activityStep)
	for _, p := range r.points() {
		if p.grants == 1 {
			t.Fatalf("a step older than 15 minutes is still in the ring: %+v", p)
		}
	}
}

// A latency's bucket holds it, and its upper bound is at most 25% above
// it; the percentiles read the buckets' upper bounds.
func TestActivityLatencyBucketsBoundTheError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		d := time.Duration(rng.Int64N(int64(time.Hour)))
		us := uint64(d.Microseconds())
		up := bucketUpper(latencyBucket(d))
		if up < us || float64(up) > 1.25*float64(us)+1 {
			t.Fatalf("%v (%d µs): bucket %d, upper bound %d", d, us, latencyBucket(d), up)
		}
		if latencyBucket(d) > 0 && bucketUpper(latencyBucket(d)-1) >= us {
			t.Fatalf("%v (%d µs): the bucket below (%d) already holds it", d, us, bucketUpper(latencyBucket(d)-1))
		}
	}
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	r := newActivityRing(clk.now)
	for i := range 100 {
		r.acquired(time.Duration(i+1) * time.Millisecond) // 1..100 ms
	}
	p := r.points()[activitySteps-1]
	if p.acquires != 100 || p.p50 < 50000 || p.p50 > 62500 || p.p99 < 99000 || p.p99 > 123750 {
		t.Fatalf("1..100 ms: %d acquires, p50 %d µs, p99 %d µs; want 100, p50 in [50000, 62500], p99 in [99000, 123750]", p.acquires, p.p50, p.p99)
	}
}

// Activity over a real node: the grants applied, the acquires answered
// with their latency, the refusals by reason; any authenticated caller.
func TestActivityCountsGrantsAcquiresAndRefusals(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t, nil)
	jobs := f.creds["jobs"]
	for _, n := range []string{"jobs/1", "jobs/2", "jobs/3"} {
		f.must(fencev1connect.LockServiceAcquireProcedure, jobs, `{"name":"`+n+`","ttl":"60s"}`)
	}
	f.refused(fencev1connect.LockServiceAcquireProcedure, jobs, `{"name":"jobs/1","ttl":"60s"}`, http.StatusTooManyRequests, "BUSY")
	f.refused(fencev1connect.LockServiceGetProcedure, f.creds["other"], `{"name":"jobs/1"}`, http.StatusForbidden, "PERMISSION_DENIED")

	out := f.must(fencev1connect.OperatorServiceActivityProcedure, f.creds["other"], `{}`)
	pts := objects(out["points"])
	if num(out["stepMs"]) != 5000 || len(pts) != activitySteps {
		t.Fatalf("stepMs %v, %d points; want 5000, %d", out["stepMs"], len(pts), activitySteps)
	}
	var grants, acquires uint64
	refusals := map[string]uint64{}
	for _, p := range pts { // the calls may straddle a step: sum them
		grants += num(p["grants"])
		acquires += num(p["acquires"])
		for _, r := range objects(p["refusals"]) {
			refusals[r["reason"].(string)] += num(r["count"])
		}
		if num(p["acquires"]) > 0 && (num(p["acquireP50Us"]) == 0 || num(p["acquireP99Us"]) < num(p["acquireP50Us"])) {
			t.Errorf("a step with acquires: p50 %v, p99 %v", p["acquireP50Us"], p["acquireP99Us"])
		}
	}
	if grants != 3 || acquires != 3 || refusals["BUSY"] != 1 || refusals["PERMISSION_DENIED"] != 1 {
		t.Fatalf("grants %d, acquires %d, refusals %v; want 3, 3, BUSY 1 and PERMISSION_DENIED 1", grants, acquires, refusals)
	}
	f.refused(fencev1connect.OperatorServiceActivityProcedure, "", `{}`, http.StatusUnauthorized, "UNAUTHENTICATED")
}
