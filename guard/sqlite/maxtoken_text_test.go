package sqlite_test

import (
	"context"
	"testing"

	"github.com/fenceworks/fence/guard/sqlite"
)

// A guard table made by hand, whose last_token column has no INTEGER
// affinity, may hold a token as TEXT; SQLite's max() orders any text above
// every integer, so a '5' would hide 4e15 and a restore floored on it
// would issue tokens the store has already accepted. MaxToken compares
// them as numbers.
func TestMaxTokenComparesTextAsNumbers(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	if _, err := db.ExecContext(ctx, `CREATE TABLE hand_guard (resource TEXT PRIMARY KEY, last_token)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO hand_guard VALUES ('a', '5'), ('b', 4000000000000000)`); err != nil {
		t.Fatal(err)
	}
	g, err := sqlite.New(sqlite.Options{Table: "hand_guard"})
	if err != nil {
		t.Fatal(err)
	}
	if max, err := g.MaxToken(ctx, db); err != nil || max != 4000000000000000 {
		t.Fatalf("MaxToken = %d, %v; want 4000000000000000 (the '5' stored as text is smaller)", max, err)
	}
}
