//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fenceworks/fence"
	redisguard "github.com/fenceworks/fence/guard/redis"
)

// The whole story against a real server: a PostgreSQL table and a Redis
// prefix poisoned with 2^53-1; max-token warns it is above the cluster's
// last token; repair without --ceiling lowers to that last token; the
// honest owner acquires again and its new token writes.
func TestProcessGuardRepairToClusterLastToken(t *testing.T) {
	dsn, table, g, conn := pgPoisoned(t, map[string]fence.Token{"sku-42": fence.MaxTokenJSONInt})
	addr := os.Getenv("FENCE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		storeUnavailable(t, "Redis at %s (FENCE_TEST_REDIS): %v", addr, err)
	}
	prefix := "clitest." + randName()
	rg, err := redisguard.New(rdb, redisguard.Options{Prefix: prefix, AcceptVolatile: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pattern, _ := redisguard.KeyPattern(prefix)
		for _, k := range rdb.Keys(ctx, pattern).Val() {
			rdb.Del(ctx, k)
		}
	})
	if _, err := rg.Set(ctx, "sku-42", fence.MaxTokenJSONInt, []byte("poison"), ""); err != nil {
		t.Fatal(err)
	}

	srv := startServe(t)
	last := tokenOf(t, fenceRun(t, srv.url, "acquire", "sku-42", "--ttl", "30s").want(t, 0, "acquire").stdout)
	fenceRun(t, srv.url, "release", "sku-42", "--token", strconv.FormatUint(last, 10)).want(t, 0, "release")

	// Poisoned: the honest owner's token is refused.
	var stale *fence.StaleTokenError
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return g.Check(ctx, tx, "sku-42", fence.Token(last)) }); !errors.As(err, &stale) {
		t.Fatalf("poisoned table: %v, want STALE_TOKEN", err)
	}
	stores := [][]string{{"--postgres", dsn, "--table", table}, {"--redis", addr, "--redis-prefix", prefix}}
	for _, store := range stores {
		mt := fenceRun(t, srv.url, append([]string{"--json", "guard", "max-token"}, store...)...).want(t, 0, "max-token")
		var obj struct {
			MaxToken, LastToken uint64
			AboveLastToken      bool
		}
		if err := json.Unmarshal([]byte(mt.stdout), &obj); err != nil || obj.MaxToken != uint64(fence.MaxTokenJSONInt) || obj.LastToken != last || !obj.AboveLastToken ||
			!strings.Contains(mt.stderr, "above the cluster's last token "+strconv.FormatUint(last, 10)) {
			t.Fatalf("max-token %v: %q %q (%v), want the warning", store, mt.stdout, mt.stderr, err)
		}
		rep := fenceRun(t, srv.url, append([]string{"guard", "repair", "--resource", "sku-42"}, store...)...).want(t, 0, "repair")
		if want := "lowered \"sku-42\": 9007199254740991 -> " + strconv.FormatUint(last, 10) + "\n"; rep.stdout != want {
			t.Fatalf("repair %v: %q, want %q", store, rep.stdout, want)
		}
		fenceRun(t, srv.url, append([]string{"guard", "repair", "--resource", "sku-42"}, store...)...).want(t, 1, "repair again")
	}
	// The honest owner acquires again: its new token is above the ceiling
	// and writes to both stores.
	next := fence.Token(tokenOf(t, fenceRun(t, srv.url, "acquire", "sku-42", "--ttl", "30s").want(t, 0, "acquire").stdout))
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return g.Check(ctx, tx, "sku-42", next) }); err != nil {
		t.Fatalf("PostgreSQL after the repair, token %d: %v", next, err)
	}
	if _, err := rg.Set(ctx, "sku-42", next, []byte("honest"), ""); err != nil {
		t.Fatalf("Redis after the repair, token %d: %v", next, err)
	}
	if mt := fenceRun(t, srv.url, append([]string{"guard", "max-token"}, stores[0]...)...).want(t, 0, "max-token"); strings.Contains(mt.stderr, "WARNING") {
		t.Fatalf("max-token still warns after the repair: %q", mt.stderr)
	}
}

// TestProcessGuardRepairRefusesMixedClusters: --server naming nodes of two
// clusters (two fresh serves: two cluster ids) is refused before the store
// is touched, naming both ids; a --server node that does not answer is
// named in a warning and the repair goes on with the nodes that did.
func TestProcessGuardRepairRefusesMixedClusters(t *testing.T) {
	dsn, table, _, conn := pgPoisoned(t, map[string]fence.Token{"sku-42": fence.MaxTokenJSONInt})
	a, b := startServe(t), startServe(t)
	idOf := func(url string) string {
		var st struct {
			ClusterID string `json:"clusterId"`
		}
		r := fenceRun(t, url, "--json", "status").want(t, 0, "status")
		if err := json.Unmarshal([]byte(strings.SplitN(r.stdout, "\n", 2)[0]), &st); err != nil || st.ClusterID == "" {
			t.Fatalf("status of %s: %q (%v)", url, r.stdout, err)
		}
		return st.ClusterID
	}
	idA, idB := idOf(a.url), idOf(b.url)
	if idA == idB {
		t.Fatalf("two fresh servers share cluster id %q", idA)
	}
	fenceRun(t, a.url, "acquire", "sku-42", "--ttl", "30s").want(t, 0, "acquire")
	store := []string{"guard", "repair", "--resource", "sku-42", "--postgres", dsn, "--table", table}
	mixed := fenceRun(t, a.url+","+b.url, store...).want(t, 1, "repair over two clusters")
	if !strings.Contains(mixed.stderr, "different clusters") || !strings.Contains(mixed.stderr, idA) || !strings.Contains(mixed.stderr, idB) {
		t.Fatalf("repair over two clusters: stderr %q, want both cluster ids named", mixed.stderr)
	}
	if stored := pgLast(t, conn, table, "sku-42"); stored != fence.MaxTokenJSONInt {
		t.Fatalf("after the refused repair the stored token is %d, want it unchanged", stored)
	}
	// A node that does not answer: b, stopped.
	b.cmd.Process.Signal(syscall.SIGTERM)
	waitExited(t, b.exited, "fence serve (b)")
	rep := fenceRun(t, a.url+","+b.url, store...).want(t, 0, "repair with a node down")
	if !strings.Contains(rep.stderr, "WARNING") || !strings.Contains(rep.stderr, b.url) || !strings.Contains(rep.stdout, "lowered") {
		t.Fatalf("repair with a node down: stdout %q stderr %q, want it lowered and the node named in a warning", rep.stdout, rep.stderr)
	}
}
