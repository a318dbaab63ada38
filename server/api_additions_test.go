package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/state"
)

// Delete is fenced like Write: a stale token is refused, the holder's
// delete empties the value and keeps the last token (so the stale token is
// still refused after it), and a retried op_id is replayed.
func TestDelete(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	for _, c := range protocols(url) {
		t.Run(c.name, func(t *testing.T) {
			lock, res := "d-"+c.name, "dr-"+c.name
			acquire := func(owner string) uint64 {
				a, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: lock, Owner: owner, Ttl: durationpb.New(time.Hour)}))
				if err != nil {
					t.Fatal(err)
				}
				return a.Msg.Lease.Token
			}
			ta := acquire("A")
			if _, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: res, Token: ta, Value: []byte("v")})); err != nil {
				t.Fatal(err)
			}
			if _, err := c.locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: lock, Token: ta})); err != nil {
				t.Fatal(err)
			}
			tb := acquire("B")
			if _, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: res, Token: tb, Value: []byte("w")})); err != nil {
				t.Fatal(err)
			}
			_, err := c.res.Delete(ctx, connect.NewRequest(&fencev1.DeleteRequest{Resource: res, Token: ta}))
			var stale *fence.StaleTokenError
			if !errors.As(apierr.FromConnect(err), &stale) || stale.Token != fence.Token(ta) || stale.LastAccepted != fence.Token(tb) {
				t.Fatalf("delete with the old token = %v, want STALE_TOKEN %d < %d", err, ta, tb)
			}
			del := &fencev1.DeleteRequest{Resource: res, Token: tb, OpId: "del-" + c.name}
			d, err := c.res.Delete(ctx, connect.NewRequest(del))
			if err != nil || !d.Msg.State.Deleted || len(d.Msg.State.Value) != 0 || d.Msg.State.LastToken != tb || d.Msg.Replayed {
				t.Fatalf("delete = %v, %v; want deleted, empty, last token %d", d, err, tb)
			}
			d2, err := c.res.Delete(ctx, connect.NewRequest(del))
			if err != nil || !d2.Msg.Replayed || d2.Msg.State.Version != d.Msg.State.Version {
				t.Fatalf("retried delete = %v, %v; want the saved result", d2, err)
			}
			rd, err := c.res.Read(ctx, connect.NewRequest(&fencev1.ReadRequest{Resource: res}))
			if err != nil || !rd.Msg.State.Deleted || len(rd.Msg.State.Value) != 0 || rd.Msg.State.LastToken != tb {
				t.Fatalf("read after delete = %v, %v", rd, err)
			}
			_, err = c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: res, Token: ta, Value: []byte("late")}))
			if !errors.Is(apierr.FromConnect(err), fence.ErrStaleToken) {
				t.Fatalf("old token's write after the delete = %v, want STALE_TOKEN", err)
			}
			checkInvalid(t, func() error {
				_, err := c.res.Delete(ctx, connect.NewRequest(&fencev1.DeleteRequest{Resource: res}))
				return err
			}(), "token")
		})
	}
}

// List pages through every lock once, in name order; page_size and
// page_token out of bounds are invalid_argument naming the field.
func TestListPages(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	c := protocols(url)[1]
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("p/%02d", i)
		want = append(want, name)
		if _, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Ttl: durationpb.New(time.Hour)})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "q", Ttl: durationpb.New(time.Hour)})); err != nil {
		t.Fatal(err)
	}
	var got []string
	var sizes []int
	tok := ""
	for {
		l, err := c.locks.List(ctx, connect.NewRequest(&fencev1.ListRequest{Prefix: "p/", PageSize: 10, PageToken: tok}))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(l.Msg.Locks))
		for _, li := range l.Msg.Locks {
			got = append(got, li.Name)
		}
		if tok = l.Msg.NextPageToken; tok == "" {
			break
		}
		if len(sizes) > 10 {
			t.Fatalf("List does not end: pages %v", sizes)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(sizes) != "[10 10 5]" {
		t.Fatalf("pages %v listed %v, want [10 10 5] listing %v", sizes, got, want)
	}
	// The default page holds them all.
	l, err := c.locks.List(ctx, connect.NewRequest(&fencev1.ListRequest{}))
	if err != nil || len(l.Msg.Locks) != 26 || l.Msg.NextPageToken != "" {
		t.Fatalf("default page = %d locks, next %q, %v; want 26 and no next page", len(l.Msg.GetLocks()), l.Msg.GetNextPageToken(), err)
	}

	for _, p := range protocols(url) {
		_, err := p.locks.List(ctx, connect.NewRequest(&fencev1.ListRequest{PageSize: MaxPageSize + 1}))
		checkInvalid(t, err, "page_size")
		if inv := new(fence.InvalidError); !errors.As(apierr.FromConnect(err), &inv) || !strings.Contains(inv.Bound, fmt.Sprint(MaxPageSize)) {
			t.Fatalf("page_size refusal %v does not name the bound %d", err, MaxPageSize)
		}
		_, err = p.locks.List(ctx, connect.NewRequest(&fencev1.ListRequest{PageToken: "not a token"}))
		checkInvalid(t, err, "page_token")
	}
}

// An outcome the node does not know is unavailable (the client retries
// with the same id), not internal; a RESOURCE_EXHAUSTED refusal is counted
// by its limit.
func TestErrorMapping(t *testing.T) {
	s, url := startServer(t)
	ctx := context.Background()
	for _, err := range []error{
		fmt.Errorf("apply: %w", errUnknownOutcome),
		fmt.Errorf("%w: %w", errUnknownOutcome, context.Canceled),
	} {
		if got := s.connectError(ctx, "p", err); connect.CodeOf(got) != connect.CodeUnavailable {
			t.Fatalf("connectError(%v) = %v, want unavailable", err, got)
		}
	}
	ex := fence.Exhausted(`waiters on lock "x" (config.max_waiters_per_lock)`, "at most 2", "2")
	got := s.connectError(ctx, "p", ex)
	var back *fence.ResourceExhaustedError
	if connect.CodeOf(got) != connect.CodeResourceExhausted || !errors.As(apierr.FromConnect(got), &back) || back.Limit != ex.(*fence.ResourceExhaustedError).Limit {
		t.Fatalf("connectError(%v) = %v, want resource_exhausted with the limit", ex, got)
	}
	if want := `fence_resource_exhausted_total{limit="max_waiters_per_lock"} 1`; !strings.Contains(scrapeMetrics(t, url), want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}

// The rules in Config reach the machine: over a cap, a request is refused
// with RESOURCE_EXHAUSTED naming the limit (not BUSY), and counted.
func TestRulesReachTheMachine(t *testing.T) {
	rules := state.DefaultConfig()
	rules.MaxWaitersPerLock = 1
	s, url := startServerRules(t, rules)
	ctx := context.Background()
	c := protocols(url)[1]
	if _, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "capped", Owner: "A", Ttl: durationpb.New(time.Hour)})); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, err := c.locks.Acquire(wctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "capped", Owner: "B", Ttl: durationpb.New(time.Hour), Wait: durationpb.New(time.Hour)}))
		waited <- err
	}()
	until(t, "B's acquire waits", func() bool { return waitersOf(s) == 1 })
	// (Without the cap, C would wait 2s and get BUSY.)
	_, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "capped", Owner: "C", Ttl: durationpb.New(time.Hour), Wait: durationpb.New(2 * time.Second)}))
	var ex *fence.ResourceExhaustedError
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !errors.As(apierr.FromConnect(err), &ex) ||
		errors.Is(apierr.FromConnect(err), fence.ErrBusy) || !strings.Contains(ex.Limit, "max_waiters_per_lock") || ex.Bound != "at most 1" {
		t.Fatalf("second waiter = %v, want RESOURCE_EXHAUSTED naming max_waiters_per_lock, at most 1", err)
	}
	cancel()
	<-waited
	if want := `fence_resource_exhausted_total{limit="max_waiters_per_lock"} 1`; !strings.Contains(scrapeMetrics(t, url), want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}

// fence_oldest_remembered_id_age_seconds is 0 with no id remembered and
// grows from the first op_id on.
func TestOldestIDAgeMetric(t *testing.T) {
	_, url := startServerOnNode(t, Config{}) // the node's gauge
	age := func() float64 {
		t.Helper()
		for _, line := range strings.Split(scrapeMetrics(t, url), "\n") {
			if v, ok := strings.CutPrefix(line, "fence_oldest_remembered_id_age_seconds "); ok {
				var f float64
				if _, err := fmt.Sscan(v, &f); err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		t.Fatal("/metrics lacks fence_oldest_remembered_id_age_seconds")
		return 0
	}
	if a := age(); a != 0 {
		t.Fatalf("age with no id remembered = %v, want 0", a)
	}
	c := protocols(url)[1]
	ctx := context.Background()
	a, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "l", Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: "r", Token: a.Msg.Lease.Token, Value: []byte("v"), OpId: "first"})); err != nil {
		t.Fatal(err)
	}
	first := age()
	if first <= 0 {
		t.Fatalf("age after an op_id = %v, want > 0", first)
	}
	if second := age(); second < first {
		t.Fatalf("age went back from %v to %v", first, second)
	}
	// The id memory's count, cap, bytes and near-cap flag are exported
	// beside it (issue 24).
	page := scrapeMetrics(t, url)
	for _, want := range []string{`fence_remembered_ids{kind="op_id"} 1`, `fence_remembered_ids{kind="request_id"} 0`,
		`fence_remembered_ids_max{kind="op_id"} 1e+06`, "fence_id_memory_near_cap 0", "fence_id_memory_bytes ", "fence_snapshot_bytes "} {
		if !strings.Contains(page, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	// The start's parts, once the log held at start is applied (the node
	// logs them in a goroutine: wait for them).
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(page, `fence_start_seconds{part="total"} `); page = scrapeMetrics(t, url) { // hang guard
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks fence_start_seconds{part=\"total\"}")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, part := range []string{"storage", "raft", "wait", "apply"} {
		if want := `fence_start_seconds{part="` + part + `"} `; !strings.Contains(page, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(page, "fence_start_replayed_entries ") {
		t.Fatal("/metrics lacks fence_start_replayed_entries")
	}
}

// scrapeMetrics returns the server's /metrics page; anything but a 200 with
// a whole body fails the test.
func scrapeMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: status %d, %v", resp.StatusCode, err)
	}
	return string(body)
}
