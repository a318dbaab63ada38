//go:build e2e

package system_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/harness"
)

// Lock boundaries (issue 23) on every path, each against a single node and
// through a follower of a 3-node cluster: a set, shared holders and permits
// with the Go client on its session stream and over unary calls, and as
// unary JSON with a real curl. Needs the state's sets, modes and permits.
func TestLockBoundariesSingleNode(t *testing.T) {
	srv := startServer(t)
	lockBoundariesOn(t, srv.URL())
}

func TestLockBoundariesThroughFollower(t *testing.T) {
	c := harness.StartClusterT(t, clusterConfig(3))
	leader := waitLeader(t, c)
	for _, n := range c.Nodes() {
		if n != leader {
			lockBoundariesOn(t, n.URL())
			return
		}
	}
	t.Fatal("no follower")
}

func lockBoundariesOn(t *testing.T, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	stream, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	unary, err := client.New(url, client.WithoutSession())
	if err != nil {
		t.Fatal(err)
	}
	defer unary.Close()

	for _, tc := range []struct {
		path string
		c    *client.Client
		opts []client.AcquireOption
	}{
		{"stream", stream, nil},
		{"unary", unary, []client.AcquireOption{client.TTL(30 * time.Second)}},
	} {
		p := tc.path + "/"
		// A set, listed out of order: held sorted, one token, a proof per lock.
		set, err := tc.c.AcquireSet(ctx, []fence.LockSpec{{Name: p + "sku/2"}, {Name: p + "catalog", Mode: fence.Shared}, {Name: p + "sku/1"}}, tc.opts...)
		if err != nil {
			t.Fatalf("%s: set: %v", tc.path, err)
		}
		locks, proofs := set.Locks(), set.Proofs()
		if len(locks) != 3 || locks[0] != (fence.LockSpec{Name: p + "catalog", Mode: fence.Shared}) || locks[1].Name != p+"sku/1" ||
			set.Name() != p+"catalog" || len(proofs) != 3 {
			t.Fatalf("%s: set lease locks %v, %d proofs", tc.path, locks, len(proofs))
		}
		for i, s := range locks {
			if !proofs[i].Signed() || set.ProofFor(s.Name).String() != proofs[i].String() {
				t.Fatalf("%s: proof of %s = %v", tc.path, s.Name, proofs[i])
			}
		}
		// The set's exclusive lock is busy; its shared lock takes another
		// shared holder, with a newer token, but no exclusive one.
		if _, err := tc.c.Acquire(ctx, p+"sku/1", tc.opts...); !errors.Is(err, fence.ErrBusy) {
			t.Fatalf("%s: sku/1 held by the set: %v, want BUSY", tc.path, err)
		}
		reader, err := tc.c.Acquire(ctx, p+"catalog", append([]client.AcquireOption{client.Shared()}, tc.opts...)...)
		if err != nil || reader.Token() <= set.Token() || reader.Mode() != fence.Shared {
			t.Fatalf("%s: shared beside the set: %v, %v", tc.path, reader, err)
		}
		if _, err := tc.c.Acquire(ctx, p+"catalog", tc.opts...); !errors.Is(err, fence.ErrBusy) {
			t.Fatalf("%s: catalog exclusive beside shared holders: %v, want BUSY", tc.path, err)
		}
		info, err := tc.c.Get(ctx, p+"catalog")
		if err != nil || len(info.Holders) != 2 || info.Holders[0].Token != set.Token() || info.Holders[1].Token != reader.Token() {
			t.Fatalf("%s: Get(catalog) = %+v, %v; want the set's lease and the reader, in grant order", tc.path, info, err)
		}
		// Releasing the set by any of its names frees every lock.
		if err := set.Release(ctx); err != nil {
			t.Fatal(err)
		}
		sku, err := tc.c.Acquire(ctx, p+"sku/2", tc.opts...)
		if err != nil {
			t.Fatalf("%s: sku/2 after the set's release: %v", tc.path, err)
		}
		_ = sku.Release(ctx)
		_ = reader.Release(ctx)

		// Permits: two holders of 2, a third busy, another count refused.
		var held []*client.Lease
		for range 2 {
			l, err := tc.c.Acquire(ctx, p+"exchange", append([]client.AcquireOption{client.Permits(2)}, tc.opts...)...)
			if err != nil || l.Permits() != 2 {
				t.Fatalf("%s: permit: %v, %v", tc.path, l, err)
			}
			held = append(held, l)
		}
		if _, err := tc.c.Acquire(ctx, p+"exchange", append([]client.AcquireOption{client.Permits(2)}, tc.opts...)...); !errors.Is(err, fence.ErrBusy) {
			t.Fatalf("%s: a third permit of 2: %v, want BUSY", tc.path, err)
		}
		var mm *fence.PermitsMismatchError
		if _, err := tc.c.Acquire(ctx, p+"exchange", append([]client.AcquireOption{client.Permits(3)}, tc.opts...)...); !errors.As(err, &mm) ||
			mm.Name != p+"exchange" || mm.Permits != 3 || mm.Current != 2 {
			t.Fatalf("%s: permits 3 on a lock of 2: %v, want *PermitsMismatchError naming both", tc.path, err)
		}
		for _, l := range held {
			_ = l.Release(ctx)
		}
	}

	// Unary JSON, as curl sends it.
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl not found: the JSON path is shown with a real curl")
	}
	curl := func(body string) (int, map[string]any) {
		t.Helper()
		out, err := exec.CommandContext(ctx, "curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
			"-d", body, url+"/fence.v1.LockService/Acquire").Output()
		if err != nil {
			t.Fatalf("curl %s: %v", body, err)
		}
		text := strings.TrimSpace(string(out))
		i := strings.LastIndexByte(text, '\n')
		var m map[string]any
		if err := json.Unmarshal([]byte(text[:i]), &m); err != nil {
			t.Fatalf("curl %s: %q", body, out)
		}
		code := 0
		for _, d := range text[i+1:] {
			code = code*10 + int(d-'0')
		}
		return code, m
	}
	code, m := curl(`{"locks":[{"name":"json/sku/9"},{"name":"json/catalog","mode":"shared"}],"owner":"curl","ttl":30}`)
	lease, _ := m["lease"].(map[string]any)
	locks, _ := lease["locks"].([]any)
	proofs, _ := lease["proofs"].([]any)
	if code != 200 || len(locks) != 2 || len(proofs) != 2 || lease["name"] != "json/catalog" {
		t.Fatalf("curl set acquire: %d %v", code, m)
	}
	if code, m = curl(`{"name":"json/catalog","mode":"shared","ttl":"30s"}`); code != 200 || at(m, "lease", "mode") != "shared" {
		t.Fatalf("curl shared acquire: %d %v", code, m)
	}
	if code, m = curl(`{"name":"json/x","permits":4,"ttl":"30s"}`); code != 200 || at(m, "lease", "permits") != float64(4) {
		t.Fatalf("curl permits acquire: %d %v", code, m)
	}
	if code, m = curl(`{"name":"json/x","permits":5,"ttl":"30s"}`); code != 400 || m["reason"] != "PERMITS_MISMATCH" ||
		at(m, "facts", "permits") != float64(5) || at(m, "facts", "currentPermits") != float64(4) || at(m, "facts", "name") != "json/x" {
		t.Fatalf("curl permits mismatch: %d %v, want 400 PERMITS_MISMATCH with permits 5, currentPermits 4", code, m)
	}
	if code, m = curl(`{"name":"json/y","mode":"reader","ttl":"30s"}`); code != 400 || at(m, "facts", "field") != "mode" {
		t.Fatalf("curl bad mode: %d %v, want 400 naming mode", code, m)
	}
}

// at walks m by keys.
func at(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}
