package redisguard

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/fenceworks/fence"
	"github.com/redis/go-redis/v9"
)

// MaxToken returns the largest token accepted by any resource under prefix
// ("" means DefaultPrefix), or 0 if there is none. It SCANs every key under
// the prefix (on every master of a cluster, every shard of a ring) and reads
// the token of each resource hash: O(keys), for operators — the floor of a
// restore (`fence restore --floor-from` reads it) — not for the request path. Resources written during the
// scan may or may not be counted.
func MaxToken(ctx context.Context, rdb redis.UniversalClient, prefix string) (fence.Token, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := validatePrefix(prefix); err != nil {
		return 0, err
	}
	var (
		mu  sync.Mutex
		max fence.Token
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		m, err := maxTokenOn(ctx, c, prefix)
		mu.Lock()
		if m > max {
			max = m
		}
		mu.Unlock()
		return err
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Ring:
		err = c.ForEachShard(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("redisguard: MaxToken needs a *redis.Client, *redis.ClusterClient or *redis.Ring, not %T", rdb)
	}
	if err != nil {
		return 0, err
	}
	return max, nil
}

// MaxToken is MaxToken over the guard's client and prefix.
func (g *Guard) MaxToken(ctx context.Context) (fence.Token, error) {
	return MaxToken(ctx, g.rdb, g.opts.Prefix)
}

// maxTokenOn scans one node: SCAN ... TYPE hash keeps resource keys only,
// and each page's tokens are read in one pipeline.
func maxTokenOn(ctx context.Context, c *redis.Client, prefix string) (fence.Token, error) {
	var (
		max    fence.Token
		cursor uint64
	)
	for {
		keys, next, err := c.ScanType(ctx, cursor, scanPattern(prefix), 1000, "hash").Result()
		if err != nil {
			return max, err
		}
		if len(keys) > 0 {
			cmds := make([]*redis.StringCmd, len(keys))
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, k := range keys {
					cmds[i] = p.HGet(ctx, k, "token")
				}
				return nil
			})
			if err != nil && err != redis.Nil {
				return max, err
			}
			for i, cmd := range cmds {
				s, err := cmd.Result()
				if err == redis.Nil {
					continue // deleted since the scan, or a hash without a token
				}
				if err != nil {
					return max, err
				}
				t, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return max, fmt.Errorf("%w: key %q token %q", ErrCorrupt, keys[i], s)
				}
				if fence.Token(t) > max {
					max = fence.Token(t)
				}
			}
		}
		if cursor = next; cursor == 0 {
			return max, nil
		}
	}
}
