package sqlite

import (
	"errors"
	"testing"
)

// The dialect reads the missing table's name out of the driver's message,
// wherever "no such table: " stands in it, and nothing out of another error.
func TestNoSuchTableName(t *testing.T) {
	for msg, want := range map[string]string{
		"no such table: fence_ops":                        "fence_ops",
		"SQL logic error: no such table: app_guard":       "app_guard",
		"SQL logic error: no such table: fence_guard (1)": "fence_guard (1)",
	} {
		got, ok := dialect.NoSuchTable(errors.New(msg))
		if !ok || got != want {
			t.Errorf("%q: %q, %v; want %q", msg, got, ok, want)
		}
	}
	if got, ok := dialect.NoSuchTable(errors.New("database is locked")); ok {
		t.Errorf("another error read as a missing table %q", got)
	}
}
