package redisguard

import (
	"errors"
	"fmt"
)

// ErrNotReplicated: a write was applied on the master, but fewer replicas
// than Options.WaitReplicas acknowledged it within Options.WaitTimeout.
// errors.Is(err, ErrNotReplicated) holds for a *ReplicationError.
var ErrNotReplicated = errors.New("redisguard: write not acknowledged by enough replicas")

// ReplicationError reports a write the master applied (Result is what it
// returned) that too few replicas acknowledged in time: a failover to a
// replica that missed it would lose it, token included. Its outcome is
// therefore unknown to the caller. Retry it with the same op_id: the retry
// replays the saved result (nothing applies twice) and WAITs again. A write
// without an op_id cannot be retried safely.
type ReplicationError struct {
	Want, Got int    // replicas required and acknowledged (Got -1: WAIT itself failed)
	Result    Result // what the master applied or replayed
	Err       error  // WAIT's error when Got is -1
}

func (e *ReplicationError) Error() string {
	if e.Got < 0 {
		return fmt.Sprintf("redisguard: applied on the master, but WAIT for %d replicas failed: %v", e.Want, e.Err)
	}
	return fmt.Sprintf("redisguard: applied on the master, but %d of %d replicas acknowledged it in time; a failover may lose it (retry with the same op_id)", e.Got, e.Want)
}

// Is makes errors.Is(err, ErrNotReplicated) hold.
func (e *ReplicationError) Is(target error) bool { return target == ErrNotReplicated }

func (e *ReplicationError) Unwrap() error { return e.Err }
