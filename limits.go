package fence

import "time"

// Input bounds. Requests outside them are refused with an *InvalidError that
// names the field and the bound; nothing is changed.
const (
	MinTTL              = 10 * time.Millisecond     // least TTL of a lease
	DefaultMaxTTL       = 24 * time.Hour            // default greatest TTL (the server may be configured lower or higher)
	LongestMaxTTL       = 10 * 365 * 24 * time.Hour // the greatest MaxTTL a store may be configured with (ten years)
	MaxWait             = 24 * time.Hour            // greatest wait of a blocking acquire
	MaxLockDelay        = 24 * time.Hour            // greatest lock-delay a store may be configured to allow
	DefaultMaxLockDelay = time.Minute               // default greatest lock-delay (Consul's bound; the server may be configured up to MaxLockDelay)
	MaxNameBytes        = 512                       // lock and resource names
	MaxOwnerBytes       = 256                       // owner labels
	MaxIDBytes          = 256                       // request_id and op_id
	MaxValueBytes       = 1 << 20                   // values written to fenced resources (1 MiB)
	MaxTokenJSONInt     = 1<<53 - 1                 // tokens stay exact in JSON below this
)

// Limits are the bounds of a request that a store configures (the rest are
// the constants above). The server and the node judge requests by the
// largest TTL the rules recorded in the log allow; a client, which does not
// know it, judges by the zero Limits and leaves that bound to the server.
type Limits struct {
	// MaxTTL is the largest TTL of a lease or session; 0 checks no upper
	// bound.
	MaxTTL time.Duration
	// MaxLockDelay is the largest lock-delay of an acquire; 0 checks the
	// constant MaxLockDelay.
	MaxLockDelay time.Duration
}

// lockDelayBound is the lock-delay bound to check and whether it is the
// server's own: MaxLockDelay, or the constant when it is 0 or above it.
func (l Limits) lockDelayBound() (limit time.Duration, servers bool) {
	if l.MaxLockDelay <= 0 || l.MaxLockDelay >= MaxLockDelay {
		return MaxLockDelay, false
	}
	return l.MaxLockDelay, true
}

// ValidateLockDelay checks an acquire's lock_delay against l. The bound's
// wording is made only for a refusal (every acquire is checked).
func (l Limits) ValidateLockDelay(d time.Duration) error {
	limit, servers := l.lockDelayBound()
	if d < 0 {
		return Invalid("lock_delay", "at least 0s", d.String())
	}
	if d > limit {
		bound := "at most " + limit.String()
		if servers {
			bound += " (the server's max_lock_delay)"
		}
		return Invalid("lock_delay", bound, d.String())
	}
	return nil
}

// maxTTL is the upper TTL bound to check: MaxTTL, or the largest duration
// when MaxTTL is 0.
func (l Limits) maxTTL() time.Duration {
	if l.MaxTTL <= 0 {
		return time.Duration(1<<63 - 1)
	}
	return l.MaxTTL
}

// ttlRange is the range a required ttl must be set in, as its refusal
// states it.
func (l Limits) ttlRange() string {
	if l.MaxTTL <= 0 {
		return "at least " + MinTTL.String()
	}
	return "between " + MinTTL.String() + " and " + l.MaxTTL.String()
}
