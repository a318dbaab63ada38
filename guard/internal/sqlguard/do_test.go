package sqlguard

import (
	"errors"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

// RunDo's order is the contract of both SQL guards' Do: a replay wins over a
// stale token, a stale token stops before fn, and nothing after a failing
// step runs.
func TestRunDoOrder(t *testing.T) {
	stale := &fence.StaleTokenError{Token: 1, LastAccepted: 2}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name         string
		check        error
		found        bool
		lookupErr    error
		applyErr     error
		prune        bool
		want         string // the steps that ran
		wantResult   string
		wantReplayed bool
		wantErr      error
	}{
		{name: "new op", want: "check lookup apply save commit", wantResult: "applied"},
		{name: "new op, prune due", prune: true, want: "check lookup apply save prune commit", wantResult: "applied"},
		{name: "replay", found: true, want: "check lookup", wantResult: "saved", wantReplayed: true},
		{name: "replay after a newer token", check: stale, found: true, want: "check lookup", wantResult: "saved", wantReplayed: true},
		{name: "stale new op", check: stale, want: "check lookup", wantErr: stale},
		{name: "conflicting payload", found: true, lookupErr: &fence.OpConflictError{Field: "op_id"}, want: "check lookup", wantErr: fence.ErrOpConflict},
		{name: "check fails", check: boom, want: "check", wantErr: boom},
		{name: "fn fails", applyErr: boom, want: "check lookup apply", wantErr: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			step := func(name string) { ran = append(ran, name) }
			s := DoSteps{
				Check: func() error { step("check"); return tc.check },
				Lookup: func() ([]byte, bool, error) {
					step("lookup")
					if tc.found && tc.lookupErr == nil {
						return []byte("saved"), true, nil
					}
					return nil, tc.found, tc.lookupErr
				},
				Apply:  func() ([]byte, error) { step("apply"); return []byte("applied"), tc.applyErr },
				Save:   func([]byte) error { step("save"); return nil },
				Commit: func() error { step("commit"); return nil },
			}
			if tc.prune {
				s.Prune = func() error { step("prune"); return nil }
			}
			result, replayed, err := RunDo(s)
			if got := strings.Join(ran, " "); got != tc.want {
				t.Errorf("steps %q, want %q", got, tc.want)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("err %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && (string(result) != tc.wantResult || replayed != tc.wantReplayed) {
				t.Errorf("result %q replayed %v, want %q %v", result, replayed, tc.wantResult, tc.wantReplayed)
			}
		})
	}
}
