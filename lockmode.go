package fence

import (
	"fmt"
	"sort"
	"strconv"
)

// Mode is how an acquire holds a lock: Exclusive (the default: the only
// holder) or Shared (beside other shared holders, never beside an
// exclusive one). See docs/lock-boundaries.md.
type Mode uint8

// The modes. Their numbers are part of the log format and the API: never
// renumber.
const (
	Exclusive Mode = 0
	Shared    Mode = 1
)

// String returns "exclusive" or "shared" (or "mode(N)" for a value no
// request can carry).
func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode reads "exclusive" or "shared" ("" is Exclusive).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "exclusive":
		return Exclusive, nil
	case "shared":
		return Shared, nil
	}
	return 0, Invalid("mode", `"exclusive" or "shared"`, strconv.Quote(s))
}

// Bounds of lock boundaries.
const (
	// MaxSetLocks is the most locks one acquire may name (AcquireRequest.Locks).
	MaxSetLocks = 64
	// MaxPermits is the largest permit count of a lock (AcquireRequest.Permits).
	MaxPermits = 1024
	// MaxHolders is the most leases one lock may have at once (shared
	// holders): a shared acquire beyond it waits, or is busy, as behind an
	// exclusive holder.
	MaxHolders = 1024
)

// LockSpec is one lock of a set acquire (AcquireRequest.Locks), and of the
// lease that holds it (Lease.Locks): its name, the mode it is held in, and
// its permit count.
//
// Permits > 0 makes the lock a semaphore of that many permits: up to
// Permits holders at once, each with its own lease and token; the mode is
// then Exclusive (each holder holds one permit exclusively). Every request
// on a lock with holders or waiters must name the lock's permit count (0
// for a lock that is not a semaphore): one that names another is refused
// with *PermitsMismatchError. The count is the lock's while anybody holds
// or waits for it.
type LockSpec struct {
	Name    string
	Mode    Mode
	Permits uint32
}

// ValidateLockSpec checks one lock of a request; field is how the request
// names it ("" for an acquire's own name, mode and permits fields, or
// "locks[i]." for a set's i-th lock).
func ValidateLockSpec(field string, s LockSpec) error {
	if err := ValidateName(field+"name", s.Name); err != nil {
		return err
	}
	return ValidateModePermits(field, s.Mode, s.Permits)
}

// ValidateModePermits checks a lock's mode and permits; field prefixes
// the names of both ("" or "locks[i].").
func ValidateModePermits(field string, mode Mode, permits uint32) error {
	switch {
	case mode > Shared:
		return Invalid(field+"mode", `"exclusive" or "shared"`, mode.String())
	case permits > MaxPermits:
		return Invalid(field+"permits", fmt.Sprintf("at most %d", MaxPermits), strconv.FormatUint(uint64(permits), 10))
	case permits > 0 && mode != Exclusive:
		return Invalid(field+"mode", "exclusive (the default) when permits is set: each permit holder holds one permit", mode.String())
	}
	return nil
}

// ValidateLocks checks a set acquire's locks: 1 to MaxSetLocks of them,
// each valid, no name twice.
func ValidateLocks(locks []LockSpec) error {
	if len(locks) == 0 {
		return Invalid("locks", "at least 1 lock", "0")
	}
	if len(locks) > MaxSetLocks {
		return Invalid("locks", fmt.Sprintf("at most %d locks", MaxSetLocks), strconv.Itoa(len(locks)))
	}
	seen := make(map[string]struct{}, len(locks))
	for i, s := range locks {
		field := "locks[" + strconv.Itoa(i) + "]."
		if err := ValidateLockSpec(field, s); err != nil {
			return err
		}
		if _, dup := seen[s.Name]; dup {
			return Invalid(field+"name", "named once in a set", strconv.Quote(s.Name))
		}
		seen[s.Name] = struct{}{}
	}
	return nil
}

// SortLocks returns locks sorted by name (a copy; locks is not changed):
// the order a set is held, reported and signed in, whatever order its
// request listed them.
func SortLocks(locks []LockSpec) []LockSpec {
	out := append([]LockSpec(nil), locks...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PermitsMismatchError: an acquire named Permits for lock Name, whose
// holders and waiters hold or wait for Current permits (0: the lock is not
// a semaphore). Nothing was changed.
type PermitsMismatchError struct {
	Name    string
	Permits uint32 // what the request named
	Current uint32 // what the lock has
}

func (e *PermitsMismatchError) Error() string {
	return fmt.Sprintf("lock %q has %d permits; the request named %d", e.Name, e.Current, e.Permits)
}

// Is reports ErrPermitsMismatch.
func (e *PermitsMismatchError) Is(target error) bool { return target == ErrPermitsMismatch }
