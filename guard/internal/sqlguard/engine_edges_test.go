package sqlguard

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// errNoTable is a driver's "no such table" error in the fake dialect.
var errNoTable = errors.New("no such table: fence_ops")

// A driver's missing-table error on the engine's own table comes back as a
// *MissingTableError naming it (wrapping the driver's error); success stays
// nil.
func TestEngineNamesAMissingTable(t *testing.T) {
	d := fakeDialect(false, 0)
	d.NoSuchTable = func(err error) (string, bool) {
		if errors.Is(err, errNoTable) {
			return "fence_ops", true
		}
		return "", false
	}
	e := newFakeEngine(t, d)
	db := &fakeDB{execErr: map[string]error{"PRUNEALL": errNoTable}}
	_, err := e.Prune(context.Background(), db, time.Hour)
	var missing *MissingTableError
	if !errors.As(err, &missing) || missing.Table != DefaultOpsTable || !errors.Is(err, errNoTable) {
		t.Fatalf("prune on a missing ops table: %v, want a *MissingTableError naming %s", err, DefaultOpsTable)
	}
	if _, err := e.Prune(context.Background(), &fakeDB{}, time.Hour); err != nil {
		t.Fatalf("prune on a present table: %v", err)
	}
}

// Prune(0) removes every op record (nothing is younger than no age); only a
// negative age is refused.
func TestPruneZeroAgeAccepted(t *testing.T) {
	e := newFakeEngine(t, fakeDialect(false, 0))
	db := &fakeDB{exec: map[string][]int64{"PRUNEALL": {4}}}
	if n, err := e.Prune(context.Background(), db, 0); err != nil || n != 4 {
		t.Fatalf("Prune(0): %d, %v; want 4 removed", n, err)
	}
}

// A guard table's max token of 0 is a floor of 0, found; only a negative
// one is refused.
func TestMaxTokenZeroIsAFloor(t *testing.T) {
	e := newFakeEngine(t, fakeDialect(false, 0))
	db := &fakeDB{rows: map[string][]any{"MAX": fakeRow{int64(0)}}}
	if max, found, err := e.MaxTokenFound(context.Background(), db); max != 0 || !found || err != nil {
		t.Fatalf("MAX = 0: %d, %v, %v; want 0, found", max, found, err)
	}
}

// The first call of a pruner is due, then every every-th one.
func TestPrunerFirstCallDue(t *testing.T) {
	p := NewPruner(3)
	var due []bool
	for range 4 {
		due = append(due, p.Due())
	}
	if want := []bool{true, false, false, true}; !slices.Equal(due, want) {
		t.Fatalf("every 3, calls 1..4 due: %v, want %v", due, want)
	}
}

// A dialect's own check (Dialect.Validate: e.g. a driver's byte bound)
// runs after the common one accepted the op: a valid op it refuses is
// refused before any SQL runs.
func TestDialectValidateRunsOnValidOps(t *testing.T) {
	d := fakeDialect(false, 0)
	d.Validate = func(resource, opID string) error {
		return fence.Invalid("op_id", "at most 3 bytes here", opID)
	}
	e := newFakeEngine(t, d)
	db := &fakeDB{}
	_, _, err := e.Do(context.Background(), db.begin, Op{Resource: "r", Token: 1, ID: "long"}, func(Tx) ([]byte, error) { return nil, nil })
	var inv *fence.InvalidError
	if !errors.As(err, &inv) || inv.Bound != "at most 3 bytes here" || len(db.ran) != 0 {
		t.Fatalf("Do with an op the dialect refuses: %v after %q, want its InvalidError before any SQL", err, db.ran)
	}
}

// An invalid name is quoted whole up to 80 bytes, and cut with "…" past
// them.
func TestInvalidNameShortened(t *testing.T) {
	for _, n := range []int{80, 81} {
		name := "1" + strings.Repeat("x", n-1) // a leading digit: not a plain identifier
		_, err := ParseIdent("table", name)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) {
			t.Fatalf("%d bytes: %v", n, err)
		}
		cut := strings.Contains(inv.Value, "…")
		if cut != (n > 80) {
			t.Errorf("%d-byte name shown as %s (cut %v)", n, inv.Value, cut)
		}
	}
}
