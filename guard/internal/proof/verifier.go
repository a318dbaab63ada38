package proof

import (
	"errors"
	"strconv"

	"github.com/fenceworks/fence"
)

// Config is the signed-token part of a guard's options (each guard's
// Options has the same fields, with the same names and meaning).
type Config struct {
	// KeySet is the cluster's public keys (`fence keys --json`, GET
	// /v1/keys, read with fence.ParseKeySet). With a key set every token
	// must carry a proof that holds under it for the resource's lock.
	KeySet *fence.KeySet
	// KeySource returns the current key set on every check, for guards that
	// reload it (after a rotation or a restore). Set KeySet or KeySource,
	// not both. A nil result refuses the write (ErrNoKeySet).
	KeySource func() *fence.KeySet
	// LockFor names the lock that protects a resource (default: the
	// resource's own name). A proof holds only for that lock.
	// It must be one-to-one (injective): two resources mapped to one lock
	// let whoever holds that lock write both, so a lease on one is a lease
	// on the other. "stock/"+strings.TrimPrefix(r, "sku-") is not: it
	// sends both "sku-42" and "42" to "stock/42". Map only the names you
	// mean and return "" for any other (a resource no lock protects: every
	// proof is refused); see docs/guards.md.
	LockFor func(resource string) string
	// AllowUnsigned accepts a token without a proof even with a key set
	// (a migration aid while writers move to signed tokens). It reopens
	// the hole signing closes: a made-up token without a proof is compared
	// and, if large, poisons the resource. Tokens that do carry a proof are
	// still verified.
	AllowUnsigned bool
}

// ErrNoKeySet: the guard's KeySource returned no key set. The write was
// refused and nothing changed (a guard configured for proofs fails closed).
var ErrNoKeySet = errors.New("guard: the key source returned no key set")

// Verifier checks signed tokens for one guard. The zero value and a nil
// *Verifier check nothing (a guard without keys). It is safe for
// concurrent use.
type Verifier struct{ c Config }

// New checks c: KeySet and KeySource together are refused with a
// *fence.InvalidError naming field "key_source".
func New(c Config) (*Verifier, error) {
	if c.KeySet != nil && c.KeySource != nil {
		return nil, fence.Invalid("key_source", "KeySet or KeySource, not both", "both")
	}
	return &Verifier{c: c}, nil
}

// Enabled reports whether v verifies proofs (a key set or a key source is
// configured).
func (v *Verifier) Enabled() bool {
	return v != nil && (v.c.KeySet != nil || v.c.KeySource != nil)
}

// Lock returns the name of the lock that protects resource.
func (v *Verifier) Lock(resource string) string {
	if v == nil || v.c.LockFor == nil {
		return resource
	}
	return v.c.LockFor(resource)
}

// Verify returns nil if st may be compared at resource: no key set is
// configured, or st carries a proof that holds under the current key set
// for resource's lock, or st carries no proof and AllowUnsigned is set.
// Otherwise it returns a *fence.ForgedTokenError (errors.Is
// fence.ErrForgedToken) naming the lock and why, or ErrNoKeySet.
func (v *Verifier) Verify(resource string, st fence.SignedToken) error {
	if !v.Enabled() {
		return nil
	}
	if !st.Signed() && v.c.AllowUnsigned {
		return nil
	}
	ks := v.c.KeySet
	if v.c.KeySource != nil {
		if ks = v.c.KeySource(); ks == nil {
			return ErrNoKeySet
		}
	}
	lock := v.Lock(resource)
	if lock == "" {
		return &fence.ForgedTokenError{Token: st.Token, Name: lock, Reason: "no lock protects resource " + strconv.Quote(resource)}
	}
	return ks.Verify(st, lock)
}
