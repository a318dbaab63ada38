package server

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// metricValues scrapes /metrics into "name{labels}" -> value (labels as
// the exposition prints them, sorted by name).
func metricValues(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(scrapeMetrics(t, url), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// metricsDelta compares two scrapes: every name in want moved by exactly
// its value (absent from a scrape: 0), and every other fence_ counter
// below did not move.
type metricsDelta map[string]float64

// eventCounters are the state-event counters the delta checks watch for
// moves that were not expected.
var eventCounters = []string{
	"fence_grants_total", "fence_busy_total", "fence_releases_total", "fence_expiries_total",
	`fence_stale_refusals_total{reason="STALE_TOKEN"}`, `fence_stale_refusals_total{reason="NOT_HOLDER"}`,
	`fence_stale_refusals_total{reason="LEASE_EXPIRED"}`, `fence_stale_refusals_total{reason="UNKNOWN_TOKEN"}`,
}

func (want metricsDelta) check(t *testing.T, step string, before, after map[string]float64) {
	t.Helper()
	names := append([]string(nil), eventCounters...)
	for name := range want {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		if _, ok := after[name]; !ok {
			t.Errorf("%s: /metrics lacks %s", step, name)
			continue
		}
		if got := after[name] - before[name]; got != want[name] {
			t.Errorf("%s: %s moved by %v (%v -> %v), want %v", step, name, got, before[name], after[name], want[name])
		}
	}
}

// The metrics move as the server acts, each by the right amount: a grant,
// a busy refusal (at once and after a wait), releases, stale-token
// refusals by reason (stale write, not holder, unknown token, expired
// lease), a renew and a retried acquire (no grant), an expiry, a
// blocking acquire waiting (waiters, queued) and granted on a release, resources and their bytes, the token counter; raft
// state and term; fsyncs timed. Every lease ends once: grants = releases +
// expiries + held.
func TestMetricsMoveAsTheServerActs(t *testing.T) {
	_, url := startServerOnNode(t, Config{}) // the node's gauges and counters
	c := protocols(url)[0]
	ctx := context.Background()
	acquire := func(name string, ttl, wait time.Duration) (*fencev1.Lease, error) {
		req := &fencev1.AcquireRequest{Name: name, Ttl: durationpb.New(ttl)}
		if wait > 0 {
			req.Wait = durationpb.New(wait)
		}
		res, err := c.locks.Acquire(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, apierr.FromConnect(err)
		}
		return res.Msg.GetLease(), nil
	}
	write := func(name string, token uint64, value string) error {
		_, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: name, Token: token, Value: []byte(value)}))
		return apierr.FromConnect(err)
	}
	release := func(name string, token uint64) error {
		_, err := c.locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: name, Token: token}))
		return apierr.FromConnect(err)
	}
	renew := func(name string, token uint64) error {
		_, err := c.locks.Renew(ctx, connect.NewRequest(&fencev1.RenewRequest{Name: name, Token: token}))
		return apierr.FromConnect(err)
	}
	wantReason := func(what string, err error, r fence.Reason) {
		t.Helper()
		if fence.ReasonOf(err) != r {
			t.Fatalf("%s: %v, want %s", what, err, r)
		}
	}

	m0 := metricValues(t, url)
	for _, s := range []string{"leader", "follower", "candidate", "shutdown"} {
		want := map[bool]float64{true: 1, false: 0}[s == "leader"]
		if got, ok := m0[`fence_raft_state{state="`+s+`"}`]; !ok || got != want {
			t.Errorf(`fence_raft_state{state=%q} = %v (present %t), want %v`, s, got, ok, want)
		}
	}
	if m0["fence_raft_term"] < 1 {
		t.Errorf("fence_raft_term = %v on a leader, want >= 1", m0["fence_raft_term"])
	}
	if m0["fence_data_dir_bytes"] <= 0 {
		t.Errorf("fence_data_dir_bytes = %v, want > 0 (a data dir holding a raft log)", m0["fence_data_dir_bytes"])
	}

	a, err := acquire("a", time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	m1 := metricValues(t, url)
	metricsDelta{"fence_grants_total": 1, "fence_leases_held": 1, "fence_last_token": 1}.check(t, "grant", m0, m1)
	if m1["fence_fsync_duration_seconds_count"] <= m0["fence_fsync_duration_seconds_count"] {
		t.Errorf("an acknowledged grant with no fsync timed: fence_fsync_duration_seconds_count %v -> %v",
			m0["fence_fsync_duration_seconds_count"], m1["fence_fsync_duration_seconds_count"])
	}

	_, err = acquire("a", time.Hour, 0)
	wantReason("acquire of a held lock", err, fence.ReasonBusy)
	m2 := metricValues(t, url)
	metricsDelta{"fence_busy_total": 1}.check(t, "busy at once", m1, m2)

	_, err = acquire("a", time.Hour, 20*time.Millisecond)
	wantReason("a wait that runs out", err, fence.ReasonBusy)
	m3 := metricValues(t, url)
	metricsDelta{"fence_busy_total": 1}.check(t, "busy after a wait", m2, m3)

	if err := write("r", a.GetToken(), "hello"); err != nil {
		t.Fatal(err)
	}
	b, err := acquire("b", time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := write("r", b.GetToken(), "hello, world"); err != nil {
		t.Fatal(err)
	}
	if err := write("s", b.GetToken(), "xyz"); err != nil {
		t.Fatal(err)
	}
	wantReason("write with the older token", write("r", a.GetToken(), "late"), fence.ReasonStaleToken)
	m4 := metricValues(t, url)
	metricsDelta{"fence_grants_total": 1, "fence_leases_held": 1, "fence_last_token": 1,
		`fence_stale_refusals_total{reason="STALE_TOKEN"}`: 1,
		"fence_resources": 2, "fence_resource_bytes": float64(len("hello, world") + len("xyz"))}.check(t, "writes", m3, m4)

	if err := release("a", a.GetToken()); err != nil {
		t.Fatal(err)
	}
	m5 := metricValues(t, url)
	metricsDelta{"fence_releases_total": 1, "fence_leases_held": -1}.check(t, "release", m4, m5)

	if err := renew("b", b.GetToken()); err != nil {
		t.Fatal(err)
	}
	wantReason("release again", release("a", a.GetToken()), fence.ReasonNotHolder)
	wantReason("renew of a token never issued", renew("b", 999), fence.ReasonUnknownToken)
	m6 := metricValues(t, url)
	metricsDelta{`fence_stale_refusals_total{reason="NOT_HOLDER"}`: 1, `fence_stale_refusals_total{reason="UNKNOWN_TOKEN"}`: 1}.check(t, "renew, not holder, unknown token", m5, m6)

	// A retried request_id is answered from memory: one grant.
	for range 2 {
		if _, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "d", Ttl: durationpb.New(time.Hour), RequestId: "d-1"})); err != nil {
			t.Fatal(err)
		}
	}
	m6b := metricValues(t, url)
	metricsDelta{"fence_grants_total": 1, "fence_leases_held": 1}.check(t, "a request_id retried", m6, m6b)
	m6 = m6b

	e, err := acquire("e", fence.MinTTL, 0)
	if err != nil {
		t.Fatal(err)
	}
	var m7 map[string]float64
	until(t, "the short lease's expiry is counted", func() bool {
		m7 = metricValues(t, url)
		return m7["fence_expiries_total"] > m6["fence_expiries_total"]
	})
	metricsDelta{"fence_grants_total": 1, "fence_expiries_total": 1, "fence_last_token": 1}.check(t, "grant, expiry", m6, m7)
	wantReason("renew of the expired lease", renew("e", e.GetToken()), fence.ReasonLeaseExpired)
	m8 := metricValues(t, url)
	metricsDelta{`fence_stale_refusals_total{reason="LEASE_EXPIRED"}`: 1}.check(t, "renew after expiry", m7, m8)

	// A blocking acquire of the held "b" waits (waiters, queued); the
	// release hands the lock to it: a release and a grant.
	granted := make(chan error, 1)
	go func() {
		_, err := acquire("b", time.Hour, time.Hour)
		granted <- err
	}()
	until(t, "the blocking acquire waits", func() bool {
		m := metricValues(t, url)
		return m["fence_waiters"] == 1 && m["fence_queued"] == 1
	})
	m9 := metricValues(t, url)
	metricsDelta{"fence_waiters": 1, "fence_queued": 1}.check(t, "a blocking acquire waits", m8, m9)
	if err := release("b", b.GetToken()); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	m10 := metricValues(t, url)
	metricsDelta{"fence_grants_total": 1, "fence_releases_total": 1, "fence_waiters": -1, "fence_queued": -1, "fence_last_token": 1}.check(t, "a release hands the lock on", m9, m10)

	if got, want := m10["fence_grants_total"], m10["fence_releases_total"]+m10["fence_expiries_total"]+m10["fence_leases_held"]; got != want {
		t.Errorf("grants %v != releases %v + expiries %v + held %v", got, m10["fence_releases_total"], m10["fence_expiries_total"], m10["fence_leases_held"])
	}
}
