package redisguard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisAddr is FENCE_TEST_REDIS (an address or a redis:// URL), else the
// local default.
func redisOptions() (*redis.Options, error) {
	addr := os.Getenv("FENCE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	if strings.Contains(addr, "://") {
		return redis.ParseURL(addr)
	}
	return &redis.Options{Addr: addr}, nil
}

// quietLogger drops the AcceptVolatile warning in tests that mean to accept.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// redisReachable is decided once in TestMain.
var redisReachable error

func TestMain(m *testing.M) {
	flag.Parse()
	redisReachable = pingRedis()
	if redisReachable != nil && os.Getenv("CI") != "true" {
		fmt.Fprintf(os.Stderr, "\n*** SKIPPING Redis tests and examples: %v\n*** set FENCE_TEST_REDIS to a Redis address to run them\n\n", redisReachable)
		// Examples cannot skip themselves; run only Test* functions, which skip loudly.
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = flag.Set("test.run", "^Test")
		}
	}
	os.Exit(m.Run())
}

func pingRedis() error {
	opts, err := redisOptions()
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("no Redis at %s: %w", opts.Addr, err)
	}
	return nil
}

// testRedis returns a client and a fresh key prefix whose keys are removed
// when the test ends. Without Redis it skips loudly, or fails under CI=true.
func testRedis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	if redisReachable != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %v", redisReachable)
		}
		t.Skipf("SKIPPING: %v (set FENCE_TEST_REDIS)", redisReachable)
	}
	opts, _ := redisOptions()
	rdb := redis.NewClient(opts)
	prefix := "fencetest." + randomHex()
	t.Cleanup(func() {
		deletePrefix(rdb, prefix)
		rdb.Close()
	})
	return rdb, prefix
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// deletePrefix removes every key under prefix (resource hashes and op records).
func deletePrefix(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, scanPattern(prefix), 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

func newTestGuard(t testing.TB, opts Options) (*Guard, *redis.Client) {
	t.Helper()
	rdb, prefix := testRedis(t)
	opts.Prefix = prefix
	// The test Redis runs without persistence; tests that do not test the
	// durability check accept it, quietly.
	opts.AcceptVolatile = true
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	g, err := New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g, rdb
}
