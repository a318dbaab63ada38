package main

import (
	"errors"

	"github.com/fenceworks/fence"
)

// Exit codes.
const (
	exitOK      = 0 // done
	exitError   = 1 // any other failure (server unreachable, ...)
	exitUsage   = 2 // bad flags or arguments, or INVALID_ARGUMENT from the server
	exitBusy    = 3 // BUSY: the lock is held, or the wait ran out
	exitRefused = 4 // STALE_TOKEN, NOT_HOLDER, LEASE_EXPIRED, UNKNOWN_TOKEN, OP_CONFLICT, SESSION_EXPIRED, FORGED_TOKEN, PERMITS_MISMATCH
	exitLimit   = 5 // RESOURCE_EXHAUSTED: a server limit (waiters, resources, remembered ids)
	// exitNoLeader: fence status and fence members answered, but no node
	// that answered knows a leader (an election under way, no majority, a
	// node waiting to be added). It wins over exitError: a script waiting
	// for a cluster to serve tells "no leader yet" from "a node is down".
	exitNoLeader = 6
)

// exitCodeOf maps an error to the exit code. OP_CONFLICT counts as a
// refusal (4): like a stale token it is the store refusing an operation
// because of what it has already recorded, and repeating the command cannot
// succeed. RESOURCE_EXHAUSTED (5) is neither busy nor a refusal: the server
// is at a configured limit, and a repeat may succeed once load drops.
func exitCodeOf(err error) int {
	if err == nil {
		return exitOK
	}
	switch fence.ReasonOf(err) {
	case fence.ReasonInvalid:
		return exitUsage
	case fence.ReasonBusy:
		return exitBusy
	case fence.ReasonResourceExhausted:
		return exitLimit
	case fence.ReasonStaleToken, fence.ReasonNotHolder, fence.ReasonLeaseExpired,
		fence.ReasonUnknownToken, fence.ReasonOpConflict, fence.ReasonSessionExpired,
		fence.ReasonPermissionDenied, fence.ReasonUnauthenticated, fence.ReasonForgedToken,
		fence.ReasonPermitsMismatch:
		return exitRefused
	}
	var usage *usageError
	if errors.As(err, &usage) {
		return exitUsage
	}
	return exitError
}

// usageError is a bad argument found by the CLI itself.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
