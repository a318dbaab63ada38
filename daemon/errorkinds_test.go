package daemon

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/node"
)

// The server's handler tests run over fakes with errors of their own
// (server/testdeps_test.go); this pins that the daemon names the node's
// and the cluster's errors to the server, so they are answered as those
// tests show: an unknown outcome and a lost leadership are Unavailable, a
// closed node is "shutting down", a refused membership change is
// FailedPrecondition.
func TestErrorKindsNameTheNodesErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		kind error
	}{
		{fmt.Errorf("apply: %w", node.ErrUnknownOutcome), errorKinds.UnknownOutcome},
		{fmt.Errorf("%w: %w", node.ErrUnknownOutcome, context.Canceled), errorKinds.UnknownOutcome},
		{node.ErrNotLeader, errorKinds.NotLeader},
		{fmt.Errorf("x: %w", node.ErrClosed), errorKinds.Closed},
	} {
		if tc.kind == nil || !errors.Is(tc.err, tc.kind) {
			t.Errorf("%v does not match its kind %v", tc.err, tc.kind)
		}
	}
	for _, err := range []error{cluster.ErrSingleNode, cluster.ErrLastVoter, &cluster.ConflictError{}} {
		if !errorKinds.ChangeRefused(fmt.Errorf("change: %w", err)) {
			t.Errorf("%v not a refused change (FailedPrecondition)", err)
		}
	}
	if errorKinds.ChangeRefused(node.ErrNotLeader) {
		t.Error("ErrNotLeader taken for a refused change")
	}
}
