package redisguard

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/testkit/testutil"
	"github.com/redis/go-redis/v9"
)

func TestJudgeDurability(t *testing.T) {
	durable := map[string]string{"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "noeviction"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range durable {
			m[a] = b
		}
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		name   string
		cfg    map[string]string
		keyTTL bool
		want   []string // settings named by the problems
	}{
		{"durable", durable, false, nil},
		{"durable, key TTL", durable, true, nil},
		{"no persistence", with("appendonly", "no"), false, []string{"appendonly"}},
		{"fsync every second", with("appendfsync", "everysec"), false, []string{"appendfsync"}},
		{"fsync never", with("appendfsync", "no"), false, []string{"appendfsync"}},
		{"allkeys eviction", with("maxmemory-policy", "allkeys-lru"), false, []string{"maxmemory-policy"}},
		{"volatile eviction, no key TTL", with("maxmemory-policy", "volatile-lru"), false, nil},
		{"volatile eviction with key TTL", with("maxmemory-policy", "volatile-ttl"), true, []string{"maxmemory-policy"}},
		{"nothing reported", map[string]string{}, false, []string{"appendonly", "maxmemory-policy"}},
		{"the local test server", map[string]string{"appendonly": "no", "appendfsync": "everysec", "maxmemory-policy": "noeviction"}, false, []string{"appendonly"}},
	} {
		ps := judgeDurability("n:1", tc.cfg, tc.keyTTL)
		var got []string
		for _, p := range ps {
			got = append(got, p.Setting)
			if p.Node != "n:1" || p.Want == "" || p.Risk == "" {
				t.Errorf("%s: problem %+v lacks facts", tc.name, p)
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: problems with %v, want %v", tc.name, got, tc.want)
		}
	}
}

// appendOnly reads the test server's appendonly setting directly (not the
// way the guard does, which is what is under test).
func appendOnly(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	m, err := rdb.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		t.Fatal(err)
	}
	return m["appendonly"]
}

// The local test Redis runs without persistence: a guard refuses to write to
// it unless told the risk is accepted, and then it warns.
func TestVolatileRedisRefused(t *testing.T) {
	rdb, prefix := testRedis(t)
	if appendOnly(t, rdb) != "no" {
		t.Skip("!!! SKIPPING: the test Redis has appendonly on; this test needs one without persistence")
	}
	g, err := New(rdb, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Set(ctx, "sku-42", 2, []byte("8"), "op-1")
	var derr *DurabilityError
	if !errors.Is(err, ErrNotDurable) || !errors.As(err, &derr) || len(derr.Problems) == 0 {
		t.Fatalf("Set on a volatile Redis = %v; want a *DurabilityError", err)
	}
	if !strings.Contains(err.Error(), "AcceptVolatile") || !strings.Contains(err.Error(), "stale writer") {
		t.Errorf("the refusal does not explain the risk and the way out: %v", err)
	}
	for _, call := range []func() error{
		func() error { _, err := g.Add(ctx, "sku-42", 2, 1, ""); return err },
		func() error { _, err := g.Check(ctx, "sku-42", 2); return err },
		func() error { return g.VerifyDurability(ctx) },
	} {
		if err := call(); !errors.Is(err, ErrNotDurable) {
			t.Errorf("after the refusal: %v, want ErrNotDurable again", err)
		}
	}
	if n := rdb.Exists(ctx, resourceKey(prefix, "sku-42"), opKey(prefix, "sku-42", "op-1")).Val(); n != 0 {
		t.Fatalf("a refused guard wrote %d keys", n)
	}

	var logged testutil.Buffer
	g, err = New(rdb, Options{Prefix: prefix, AcceptVolatile: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Set(ctx, "sku-42", 2, []byte("8"), ""); err != nil {
		t.Fatalf("with AcceptVolatile: %v", err)
	}
	mustSet(t, g, "sku-42", 2, "9", "")
	out := logged.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "LOSE ACCEPTED TOKENS") || !strings.Contains(out, "appendonly") {
		t.Fatalf("AcceptVolatile warning, once, naming the setting; logged:\n%s", out)
	}
}

// A server whose CONFIG command is forbidden (here by an ACL, as managed
// services do by renaming it) cannot be verified: refused the same way,
// naming CONFIG, unless AcceptVolatile.
func TestUnverifiableRedisRefused(t *testing.T) {
	admin, prefix := testRedis(t)
	user := "fencetest-noconfig-" + randomHex()
	if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">fencetest", "~*", "+@all", "-config").Err(); err != nil {
		t.Fatalf("creating an ACL user without CONFIG: %v", err)
	}
	t.Cleanup(func() { admin.Do(ctx, "ACL", "DELUSER", user) })
	opts, _ := redisOptions()
	opts.Username, opts.Password = user, "fencetest"
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	g, err := New(rdb, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Set(ctx, "r", 1, []byte("v"), "")
	var derr *DurabilityError
	if !errors.As(err, &derr) || len(derr.Problems) != 1 || derr.Problems[0].Setting != "CONFIG" || !strings.Contains(derr.Problems[0].Value, "NOPERM") {
		t.Fatalf("Set without CONFIG = %v; want a *DurabilityError naming CONFIG", err)
	}
	g, err = New(rdb, Options{Prefix: prefix, AcceptVolatile: true, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	mustSet(t, g, "r", 1, "v", "")
}

// WaitReplicas: the local Redis has no replica, so WAIT 1 returns 0 after
// WaitTimeout and the write — applied on the master — is reported as a
// *ReplicationError; a retry with the same op_id replays and waits again.
func TestWaitReplicas(t *testing.T) {
	g, rdb := newTestGuard(t, Options{WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})
	if n := rdb.Info(ctx, "replication").Val(); !strings.Contains(n, "connected_slaves:0") {
		t.Skip("!!! SKIPPING: the test Redis has replicas; this test needs none")
	}
	res, err := g.Set(ctx, "r", 3, []byte("v"), "op-1")
	var rerr *ReplicationError
	if !errors.Is(err, ErrNotReplicated) || !errors.As(err, &rerr) || rerr.Want != 1 || rerr.Got != 0 {
		t.Fatalf("Set with WaitReplicas 1 and no replica = %+v, %v; want a *ReplicationError 0 of 1", res, err)
	}
	if rerr.Result.Token != 3 || rerr.Result.Replayed || res.Token != 3 {
		t.Fatalf("ReplicationError.Result = %+v; want the master's accepted write", rerr.Result)
	}
	wantState(t, g, "r", "v", 3, 1) // applied on the master
	_, err = g.Set(ctx, "r", 3, []byte("v"), "op-1")
	if !errors.As(err, &rerr) || !rerr.Result.Replayed {
		t.Fatalf("retry = %v; want a replay, still not replicated", err)
	}
	wantState(t, g, "r", "v", 3, 1)
	// A refusal is not waited for and stays a refusal.
	if _, err := g.Set(ctx, "r", 2, []byte("old"), ""); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale write with WaitReplicas: %v", err)
	}
	// WAIT 0 is satisfied at once.
	g0, err := New(rdb, Options{Prefix: g.Prefix(), WaitReplicas: 0, AcceptVolatile: true, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	mustSet(t, g0, "r", 3, "w", "")

	for _, o := range []Options{{WaitReplicas: -1}, {WaitReplicas: 1, WaitTimeout: -time.Second}, {WaitReplicas: 1, WaitTimeout: time.Microsecond}} {
		if _, err := New(rdb, o); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want invalid", o, err)
		}
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	var inv *fence.InvalidError
	if _, err := New(ring, Options{WaitReplicas: 1}); !errors.As(err, &inv) || inv.Field != "wait_replicas" {
		t.Errorf("New(ring, WaitReplicas 1) = %v, want invalid wait_replicas", err)
	}
	if _, err := New(ring, Options{}); err != nil {
		t.Errorf("New(ring) without WaitReplicas = %v", err)
	}
}
