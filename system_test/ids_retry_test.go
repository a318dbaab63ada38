//go:build e2e

package system_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// G5 under ordinary load, end to end (issue 6, fault 4): an add whose reply
// was lost is retried after 120,000 other writes, each with its own op_id,
// all well inside the promised id window. The old rule forgot op_ids by a
// global count of 100,000, so the retry was applied a second time; now the
// retry must come back Replayed with the first result and the value must
// show one application. The server is restarted between the load and the
// retry, so the id memory must also survive the log replay (and whatever
// snapshots the load caused).
func TestAddRetriedAfter120kWritesAppliesOnce(t *testing.T) {
	t.Parallel() // own processes, ports and dirs: safe beside the other parallel tests (docs/testing.md)
	if testing.Short() {
		t.Skip("120,000 writes against a real process")
	}
	// The server is built without -race (plainBinary), as the other scale
	// tests: its point is the count; the same code runs under -race in the
	// state and node tests.
	srv := startServerWith(t, plainBinary(t, "./cmd/fence"), filepath.Join(t.TempDir(), "data"))
	c := grpcAPI(srv) // h2c: one connection carries every worker's calls
	ctx := context.Background()

	lease, err := c.acquire(ctx, "sku-1", "worker", 10*time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	tok := lease.GetToken()

	add := func() (*fencev1.AddResponse, error) {
		resp, err := c.Resources.Add(ctx, connect.NewRequest(&fencev1.AddRequest{
			Resource: "stock-1", Token: tok, Delta: 5, OpId: "lost-reply-add",
		}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	first, err := add()
	if err != nil {
		t.Fatal(err)
	}
	if first.GetReplayed() || first.GetValue() != 5 {
		t.Fatalf("first add = %v, want applied with value 5", first)
	}

	// 120,000 other writes, each with a fresh op_id, from 32 workers.
	const total, workers = 120000, 32
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				_, err := c.Resources.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{
					Resource: fmt.Sprintf("churn-%d", i%64), Token: tok,
					Value: []byte("v"), OpId: fmt.Sprintf("churn-op-%d", i),
				}))
				if err != nil {
					errs <- fmt.Errorf("write %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	srv.Stop()
	srv.Restart()

	retry, err := add()
	if err != nil {
		t.Fatal(err)
	}
	if !retry.GetReplayed() || retry.GetValue() != 5 {
		t.Fatalf("retried add after %d other writes and a restart = %v, want the saved result (replayed, value 5)", total, retry)
	}
	st, err := c.read(ctx, "stock-1")
	if err != nil {
		t.Fatal(err)
	}
	if string(st.GetValue()) != "5" {
		t.Fatalf("stock-1 = %q after the retry, want \"5\" (the add applied once)", st.GetValue())
	}
}
