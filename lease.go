package fence

import "time"

// Lease is a granted lock as the server reports it.
//
// Remaining is measured by the server after it received the request that
// produced this value; a client turns it into a local safe deadline with
// SafeDeadline.
type Lease struct {
	Name      string        // the lock's name
	Owner     string        // free-form owner label given at acquire
	Token     Token         // the fencing token of this grant
	TTL       time.Duration // the TTL the lease was granted or last renewed with
	Remaining time.Duration // time left, in server time, when the reply was made
	// Signed is Token with the proof of this grant (G9; see SignedToken):
	// what a guard holding the cluster's key set verifies. Its Signature is
	// empty when the server made no proof (a grant applied before the
	// cluster had a signing key, or a listing: List does not sign).
	Signed SignedToken
	// Mode and Permits are how the lease holds Name (see LockSpec).
	Mode    Mode
	Permits uint32
	// Locks is every lock of a set's lease, sorted by name (Name is
	// Locks[0].Name); nil for a lease of one lock. One token holds them
	// all; renewing or releasing the lease by any of its names renews or
	// releases every one.
	Locks []LockSpec
	// Proofs are a set's proofs: Proofs[i] is Token's proof for
	// Locks[i].Name (Signed is Proofs[0]). A guard protecting the resource
	// of one lock verifies that lock's proof (ProofFor).
	Proofs []SignedToken
}

// ProofFor returns the proof of l's token for lock name: Signed for the
// lease's own lock, the matching entry of Proofs for a lock of its set,
// and the bare token (no proof) for a lock the lease does not hold.
func (l *Lease) ProofFor(name string) SignedToken {
	if name == l.Name && len(l.Locks) == 0 {
		return l.Signed
	}
	for i, s := range l.Locks {
		if s.Name == name && i < len(l.Proofs) {
			return l.Proofs[i]
		}
	}
	return SignedToken{Token: l.Token}
}

// DefaultDrift is the clock-rate bound the client assumes between its own
// monotonic clock and the server's when it computes a safe deadline.
const DefaultDrift = 0.01

// MinDriftMargin is the least margin subtracted from a remaining TTL when
// computing a safe deadline, whatever the drift.
const MinDriftMargin = 5 * time.Millisecond

// SafeDeadline returns the local time until which a client may consider itself
// the holder of a lease whose reply carried remaining, given that the request
// was sent at sent (read from a monotonic clock) and the clocks may drift by
// drift (a fraction, e.g. 0.01). See docs/design.md §2.
func SafeDeadline(sent time.Time, remaining time.Duration, drift float64) time.Time {
	margin := time.Duration(float64(remaining) * drift)
	if margin < MinDriftMargin {
		margin = MinDriftMargin
	}
	if remaining <= margin {
		return sent
	}
	return sent.Add(remaining - margin)
}
