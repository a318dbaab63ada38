package bench

import (
	"context"
	crand "crypto/rand"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

func init() {
	Register(redisSystem{name: "redis-always"})
	Register(redisSystem{name: "redis-everysec"})
}

// redisSystem is the standard single-instance Redis lock: SET key token NX
// PX ttl to acquire, a Lua compare-and-delete to release, polling with a
// random pause to wait (Redis has no queue). It has no fencing token: the
// "fenced" write is a plain SET that a stale owner can still make.
type redisSystem struct{ name string }

// RedisRetry is the least pause between two polls of a waiting acquire; a
// pause is random in [RedisRetry, 2×RedisRetry). Set by the runner.
var RedisRetry = 2 * time.Millisecond

func (r redisSystem) Name() string   { return r.name }
func (r redisSystem) Server() string { return r.name }
func (redisSystem) Fenced() bool     { return false }

func (r redisSystem) Open(ctx context.Context, addr string, workers int) (Client, error) {
	pool := min(max(workers, 10), 1024)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: pool, MinIdleConns: min(workers, 64),
		PoolTimeout: 5 * time.Minute, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return &redisClient{c: c}, nil
}

type redisClient struct {
	c *redis.Client
	// polled counts waiting acquires that have made their first attempt:
	// with no server-side queue, that is what "queued" means.
	polled atomic.Int64
}

func (r *redisClient) Worker(ctx context.Context, i int) (Worker, error) {
	return redisWorker{r}, nil
}
func (r *redisClient) Queued(ctx context.Context, prefix string, locks int) (int, error) {
	return int(r.polled.Load()), nil
}
func (r *redisClient) Close() error { return r.c.Close() }

type redisWorker struct{ r *redisClient }

var unlockScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

var errRedisBusy = errors.New("redis: lock is held")

func (w redisWorker) Acquire(ctx context.Context, name string, o AcquireOpts) (Held, error) {
	val := crand.Text()
	key := "lock:" + name
	var deadline time.Time
	if o.Wait > 0 {
		deadline = time.Now().Add(o.Wait)
	}
	first := true
	for {
		ok, err := w.r.c.SetNX(ctx, key, val, ttlFor(o, 10*time.Second)).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return &redisHeld{c: w.r.c, key: key, val: val}, nil
		}
		if first && o.Wait > 0 {
			first = false
			w.r.polled.Add(1)
		}
		if o.Wait <= 0 || time.Now().After(deadline) {
			return nil, errRedisBusy
		}
		pause := RedisRetry + rand.N(RedisRetry)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

func (redisWorker) Expire(ctx context.Context) (time.Time, error) { return time.Time{}, nil }
func (redisWorker) Close() error                                  { return nil }

type redisHeld struct {
	c        *redis.Client
	key, val string
}

// Write is a plain SET: Redis gives no token to check, so it is unfenced.
func (h *redisHeld) Write(ctx context.Context, key string, val []byte) error {
	return h.c.Set(ctx, "data:"+key, val, 0).Err()
}

func (h *redisHeld) Release(ctx context.Context) error {
	return unlockScript.Run(ctx, h.c, []string{h.key}, h.val).Err()
}
