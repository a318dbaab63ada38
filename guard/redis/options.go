package redisguard

import (
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/fenceworks/fence"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "fence"

// DefaultOpTTL is how long an op_id is remembered when Options.OpTTL is 0.
const DefaultOpTTL = 24 * time.Hour

// MaxPrefixBytes bounds Options.Prefix.
const MaxPrefixBytes = 64

// Options configure a Guard. The zero value is ready to use.
type Options struct {
	// Prefix starts every key the guard owns (default "fence"). Letters,
	// digits and . _ - : / only, at most MaxPrefixBytes.
	Prefix string
	// OpTTL is how long a write's op_id and saved result are remembered
	// (default 24h, at least 1ms).
	OpTTL time.Duration
	// KeyTTL, when positive, makes each write set this TTL on the resource
	// key, so a resource nobody writes for KeyTTL disappears with its last
	// token. 0 (the default) keeps resource keys forever: a forgotten token
	// lets a stale writer in again, so set KeyTTL only far above any lease.
	KeyTTL time.Duration

	// AcceptVolatile lets the guard write to a Redis server whose settings
	// can lose accepted tokens (no appendonly, appendfsync other than always,
	// an evicting maxmemory-policy) or cannot be read (CONFIG renamed or
	// forbidden). Without it the first write fails with a *DurabilityError
	// (see Guard.VerifyDurability); with it the guard logs one loud warning
	// and writes. Set it for tests, caches, or a server you have verified
	// yourself when CONFIG is unavailable.
	AcceptVolatile bool
	// Logger receives that warning (default slog.Default()).
	Logger *slog.Logger

	// WaitReplicas, when positive, makes every accepted or replayed write
	// (Set, Add, Check) wait — WAIT numreplicas timeout, on the connection
	// that wrote — until that many replicas have acknowledged it. Fewer
	// within WaitTimeout give a *ReplicationError: the write was applied on
	// the master but may be lost by a failover. Needs a *redis.Client or a
	// *redis.ClusterClient. Default 0: do not wait.
	WaitReplicas int
	// WaitTimeout bounds each WAIT (default 1s when WaitReplicas > 0, at
	// least 1ms).
	WaitTimeout time.Duration

	// KeySet is the Fence cluster's public signing keys (`fence keys
	// --json` or GET /v1/keys, read with fence.ParseKeySet). With a key set
	// the guard verifies every token's proof, in Go, before it runs the
	// script: a token without a proof, or whose proof does not hold for the
	// resource's lock under a key of this cluster (a tampered token, another
	// lock's or another cluster's proof, a made-up one), is refused with
	// *fence.ForgedTokenError (errors.Is fence.ErrForgedToken) and Redis is
	// not touched. Without one (the default) any number is compared, and a
	// made-up token such as 2^53-1 is accepted and then refuses every
	// honest owner (`fence guard repair` undoes that).
	KeySet *fence.KeySet
	// KeySource, instead of KeySet, returns the current key set on every
	// write (reload it after a `fence keys rotate` or a restore). A nil
	// result refuses the write. Set KeySet or KeySource, not both.
	KeySource func() *fence.KeySet
	// LockFor names the lock whose proofs a resource accepts (default: the
	// lock of the resource's own name).
	// It must be one-to-one (injective): two resources mapped to one lock
	// let whoever holds that lock write both, so a lease on one is a lease
	// on the other. "stock/"+strings.TrimPrefix(r, "sku-") is not: it
	// sends both "sku-42" and "42" to "stock/42". Map only the names you
	// mean and return "" for any other (a resource no lock protects: every
	// proof is refused); see docs/guards.md.
	LockFor func(resource string) string
	// AllowUnsigned accepts tokens without a proof even with a key set, for
	// the time writers move to signed tokens. It reopens the hole: a
	// made-up unsigned token is compared, and a large one poisons the
	// resource. Signed tokens are still verified.
	AllowUnsigned bool
}

// DefaultWaitTimeout is Options.WaitTimeout when WaitReplicas > 0 and
// WaitTimeout is 0.
const DefaultWaitTimeout = time.Second

func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if err := validatePrefix(o.Prefix); err != nil {
		return o, err
	}
	switch {
	case o.OpTTL == 0:
		o.OpTTL = DefaultOpTTL
	case o.OpTTL < time.Millisecond:
		return o, fence.Invalid("op_ttl", "at least 1ms (or 0 for the default 24h)", o.OpTTL.String())
	}
	if o.KeyTTL < 0 || (o.KeyTTL > 0 && o.KeyTTL < time.Millisecond) {
		return o, fence.Invalid("key_ttl", "0 (no TTL) or at least 1ms", o.KeyTTL.String())
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.WaitReplicas < 0 {
		return o, fence.Invalid("wait_replicas", "at least 0", strconv.Itoa(o.WaitReplicas))
	}
	switch {
	case o.WaitTimeout < 0 || (o.WaitTimeout > 0 && o.WaitTimeout < time.Millisecond):
		return o, fence.Invalid("wait_timeout", "0 (the default 1s) or at least 1ms", o.WaitTimeout.String())
	case o.WaitTimeout == 0 && o.WaitReplicas > 0:
		o.WaitTimeout = DefaultWaitTimeout
	}
	return o, nil
}

// validatePrefix keeps prefixes free of hash-tag braces and glob characters,
// so that keys cannot collide and MaxToken's SCAN pattern needs no escaping.
func validatePrefix(p string) error {
	if len(p) > MaxPrefixBytes {
		return fence.Invalid("prefix", "at most 64 bytes", p[:16]+"...")
	}
	if i := strings.IndexFunc(p, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:/", r))
	}); i >= 0 {
		return fence.Invalid("prefix", "letters, digits and . _ - : / only", p)
	}
	return nil
}
