package redisguard

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fenceworks/fence"
	"github.com/redis/go-redis/v9"
)

// Stored is one resource and the last token it accepted.
type Stored struct {
	Resource string
	Token    fence.Token
}

// Above returns the resources under guardPrefix ("" means DefaultPrefix)
// named resource (if not empty), or starting with prefix, whose last token
// is above ceiling, sorted by resource — in a store a made-up token has
// poisoned, the tokens Fence never issued: a cluster's tokens never exceed
// its last token (`fence status` lastToken). For a prefix it SCANs every key
// under guardPrefix, as MaxToken does (O(keys), for operators). `fence guard
// repair` reads with Above and lowers with Lower. A ceiling of 0 or above
// fence.MaxTokenJSONInt is refused with *fence.InvalidError.
func Above(ctx context.Context, rdb redis.UniversalClient, guardPrefix, resource, prefix string, ceiling fence.Token) ([]Stored, error) {
	if guardPrefix == "" {
		guardPrefix = DefaultPrefix
	}
	if err := validatePrefix(guardPrefix); err != nil {
		return nil, err
	}
	if err := validCeiling(ceiling); err != nil {
		return nil, err
	}
	if resource != "" {
		s, err := rdb.HGet(ctx, resourceKey(guardPrefix, resource), "token").Result()
		if err == redis.Nil {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		t, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: resource %q token %q", ErrCorrupt, resource, s)
		}
		if fence.Token(t) > ceiling {
			return []Stored{{resource, fence.Token(t)}}, nil
		}
		return nil, nil
	}
	var (
		mu  sync.Mutex
		out []Stored
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		found, err := aboveOn(ctx, c, guardPrefix, prefix, ceiling)
		mu.Lock()
		out = append(out, found...)
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
		err = fmt.Errorf("redisguard: Above needs a *redis.Client, *redis.ClusterClient or *redis.Ring, not %T", rdb)
	}
	slices.SortFunc(out, func(a, b Stored) int { return strings.Compare(a.Resource, b.Resource) })
	return out, err
}

// aboveOn scans one node's resource hashes under guardPrefix.
func aboveOn(ctx context.Context, c *redis.Client, guardPrefix, prefix string, ceiling fence.Token) ([]Stored, error) {
	start := keyStart(guardPrefix)
	var (
		out    []Stored
		cursor uint64
	)
	for {
		keys, next, err := c.ScanType(ctx, cursor, scanPattern(guardPrefix), 1000, "hash").Result()
		if err != nil {
			return out, err
		}
		var mine []string
		for _, k := range keys {
			// A resource key is start + resource + "}" (keys.go).
			if res := strings.TrimSuffix(strings.TrimPrefix(k, start), "}"); strings.HasSuffix(k, "}") && strings.HasPrefix(res, prefix) {
				mine = append(mine, k)
			}
		}
		if len(mine) > 0 {
			cmds := make([]*redis.StringCmd, len(mine))
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, k := range mine {
					cmds[i] = p.HGet(ctx, k, "token")
				}
				return nil
			})
			if err != nil && err != redis.Nil {
				return out, err
			}
			for i, cmd := range cmds {
				s, err := cmd.Result()
				if err == redis.Nil {
					continue
				}
				if err != nil {
					return out, err
				}
				t, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return out, fmt.Errorf("%w: key %q token %q", ErrCorrupt, mine[i], s)
				}
				if fence.Token(t) > ceiling {
					out = append(out, Stored{strings.TrimSuffix(strings.TrimPrefix(mine[i], start), "}"), fence.Token(t)})
				}
			}
		}
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// lowerScript sets the token of KEYS[1] to ARGV[1] if it still is ARGV[2].
var lowerScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') == ARGV[2] then
  redis.call('HSET', KEYS[1], 'token', ARGV[1])
  return 1
end
return 0`)

// Lower sets the last token of s.Resource under guardPrefix to ceiling, if
// it still holds s.Token (read by Above) and s.Token is above ceiling: one
// script, so a resource written since is left alone (lowered = false). The
// value and version are kept. After it, the next token the cluster issues
// (above ceiling) is accepted again; a token at or below ceiling stays
// refused. A ceiling at or above s.Token is refused with
// *fence.InvalidError.
func Lower(ctx context.Context, rdb redis.UniversalClient, guardPrefix string, s Stored, ceiling fence.Token) (lowered bool, err error) {
	if guardPrefix == "" {
		guardPrefix = DefaultPrefix
	}
	if err := validatePrefix(guardPrefix); err != nil {
		return false, err
	}
	if err := validCeiling(ceiling); err != nil {
		return false, err
	}
	if s.Token <= ceiling {
		return false, fence.Invalid("ceiling", "below the stored token "+s.Token.String(), ceiling.String())
	}
	if err := fence.ValidateName("resource", s.Resource); err != nil {
		return false, err
	}
	n, err := lowerScript.Run(ctx, rdb, []string{resourceKey(guardPrefix, s.Resource)}, uint64(ceiling), strconv.FormatUint(uint64(s.Token), 10)).Int()
	return n == 1, err
}

// Above is Above over the guard's client and prefix.
func (g *Guard) Above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]Stored, error) {
	return Above(ctx, g.rdb, g.opts.Prefix, resource, prefix, ceiling)
}

// Lower is Lower over the guard's client and prefix.
func (g *Guard) Lower(ctx context.Context, s Stored, ceiling fence.Token) (bool, error) {
	return Lower(ctx, g.rdb, g.opts.Prefix, s, ceiling)
}

func validCeiling(c fence.Token) error {
	if c == 0 || c > fence.MaxTokenJSONInt {
		return fence.Invalid("ceiling", fmt.Sprintf("in [1, %d]", uint64(fence.MaxTokenJSONInt)), c.String())
	}
	return nil
}
