package redisguard

import (
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
}

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
