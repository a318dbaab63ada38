package redisguard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrNotDurable: the Redis server's settings can lose tokens the guard has
// accepted, or cannot be read. errors.Is(err, ErrNotDurable) holds for a
// *DurabilityError.
var ErrNotDurable = errors.New("redisguard: Redis may lose accepted tokens")

// DurabilityError refuses a Redis server whose settings can lose accepted
// tokens. A guard that forgets a token accepts the stale writer it exists to
// refuse: after a restart of a server without persistence every resource
// starts again from no token, and an evicted resource key the same.
// The guard returns it from its first write (and from VerifyDurability)
// unless Options.AcceptVolatile is set.
type DurabilityError struct {
	Problems []Problem
}

// Problem is one setting of one node that can lose accepted tokens.
type Problem struct {
	Node    string // the node's address
	Setting string // appendonly, appendfsync, maxmemory-policy; CONFIG when the settings could not be read
	Value   string // what the node reports (for CONFIG: its error)
	Want    string
	Risk    string // what can go wrong
}

func (p Problem) String() string {
	return fmt.Sprintf("%s: %s is %q, want %s: %s", p.Node, p.Setting, p.Value, p.Want, p.Risk)
}

func (e *DurabilityError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "redisguard: Redis may lose accepted tokens, and a stale writer would then be accepted (set Options.AcceptVolatile to accept the risk): " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrNotDurable) hold.
func (e *DurabilityError) Is(target error) bool { return target == ErrNotDurable }

// durabilitySettings are read with CONFIG GET, one parameter a call (Redis
// before 7 takes one).
var durabilitySettings = []string{"appendonly", "appendfsync", "maxmemory-policy"}

// judgeDurability lists what in one node's settings can lose accepted
// tokens. keyTTL reports whether resource keys carry a TTL (Options.KeyTTL):
// then a volatile-* eviction policy can evict them too.
func judgeDurability(node string, cfg map[string]string, keyTTL bool) []Problem {
	var ps []Problem
	add := func(setting, want, risk string) {
		v, ok := cfg[setting]
		if !ok {
			v = "(not reported)"
		}
		ps = append(ps, Problem{Node: node, Setting: setting, Value: v, Want: want, Risk: risk})
	}
	switch {
	case cfg["appendonly"] != "yes":
		add("appendonly", `"yes" with appendfsync "always"`,
			"a restart forgets every token accepted since the last RDB snapshot (all of them without one)")
	case cfg["appendfsync"] != "always":
		add("appendfsync", `"always"`,
			"a crash of the machine or a power loss forgets the tokens accepted in the last second (everysec) or more (no)")
	}
	switch policy := cfg["maxmemory-policy"]; {
	case policy == "noeviction":
	case strings.HasPrefix(policy, "volatile-") && !keyTTL:
		// Resource keys have no TTL, so they are never evicted. Op records
		// have one: under memory pressure they may go before OpTTL, and a
		// retry of such an op applies again (documented, not refused).
	case strings.HasPrefix(policy, "volatile-"):
		add("maxmemory-policy", `"noeviction" (Options.KeyTTL gives resource keys a TTL)`,
			"under memory pressure Redis evicts keys with a TTL, resource keys and their tokens included")
	default:
		add("maxmemory-policy", `"noeviction" or "volatile-*"`,
			"under memory pressure Redis evicts any key, resource keys and their tokens included")
	}
	return ps
}

// readSettings reads the durability settings of one node. A Redis error
// reply (CONFIG renamed away, or forbidden by an ACL, as on many managed
// services) is a Problem: durability cannot be verified. Any other error
// (the network, ctx) is returned as it is.
func readSettings(ctx context.Context, c *redis.Client, keyTTL bool) ([]Problem, error) {
	node := c.Options().Addr
	cfg := map[string]string{}
	for _, s := range durabilitySettings {
		m, err := c.ConfigGet(ctx, s).Result()
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return []Problem{{Node: node, Setting: "CONFIG", Value: err.Error(), Want: "CONFIG GET allowed",
				Risk: "the persistence settings cannot be verified (CONFIG renamed or forbidden, as on many managed services): make sure the server has appendonly yes, appendfsync always and maxmemory-policy noeviction, then set Options.AcceptVolatile"}}, nil
		}
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			cfg[strings.ToLower(k)] = strings.ToLower(v)
		}
	}
	return judgeDurability(node, cfg, keyTTL), nil
}

// durability is the outcome of the guard's one durability check.
type durability struct {
	mu      sync.Mutex
	checked bool
	err     error // *DurabilityError, or nil (durable, or accepted)
}

// VerifyDurability checks, once per Guard, that the Redis server (every
// node of a cluster or ring) keeps what the guard accepts: CONFIG GET
// appendonly (want yes), appendfsync (want always) and maxmemory-policy
// (want noeviction, or volatile-* when Options.KeyTTL is 0). A server that
// can lose accepted tokens, or whose CONFIG command is renamed or forbidden,
// gives a *DurabilityError (errors.Is ErrNotDurable) — unless
// Options.AcceptVolatile is set: then it logs one warning naming each
// problem (Options.Logger) and returns nil.
//
// Every write (Set, Add, Check) runs it first, so a guard refuses to write
// to a volatile server; call it at startup to fail fast. The verdict is
// kept for the Guard's life; an error reaching the server (network, ctx) is
// returned and the check runs again on the next call.
func (g *Guard) VerifyDurability(ctx context.Context) error {
	g.dur.mu.Lock()
	defer g.dur.mu.Unlock()
	if g.dur.checked {
		return g.dur.err
	}
	var (
		mu       sync.Mutex
		problems []Problem
	)
	check := func(ctx context.Context, c *redis.Client) error {
		ps, err := readSettings(ctx, c, g.opts.KeyTTL > 0)
		mu.Lock()
		problems = append(problems, ps...)
		mu.Unlock()
		return err
	}
	var err error
	switch c := g.rdb.(type) {
	case *redis.Client:
		err = check(ctx, c)
	case *redis.ClusterClient:
		err = c.ForEachShard(ctx, check) // masters and replicas: a replica may be promoted
	case *redis.Ring:
		err = c.ForEachShard(ctx, check)
	default:
		problems = append(problems, Problem{Node: "?", Setting: "CONFIG", Value: fmt.Sprintf("not read through a %T", g.rdb),
			Want: "a *redis.Client, *redis.ClusterClient or *redis.Ring", Risk: "the persistence settings cannot be verified"})
	}
	if err != nil {
		return err
	}
	g.dur.checked = true
	if len(problems) == 0 {
		return nil
	}
	derr := &DurabilityError{Problems: problems}
	if !g.opts.AcceptVolatile {
		g.dur.err = derr
		return derr
	}
	g.opts.Logger.WarnContext(ctx, "!!! redisguard: Options.AcceptVolatile is set and Redis may LOSE ACCEPTED TOKENS: after such a loss a stale writer is accepted. Fix the server's settings for fencing you can rely on.",
		"prefix", g.opts.Prefix, "problems", derr.Error())
	return nil
}
