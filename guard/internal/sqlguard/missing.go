package sqlguard

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// MissingTableError is a guard statement that ran on a table that does not
// exist: Migrate was not called (or the guard names other tables than the
// ones created). It names the table and wraps the driver's error, which
// errors.Is and errors.As still reach. Its text has no package prefix: the
// guards wrap it in their own "guard/NAME: check ...: " context.
type MissingTableError struct {
	Pkg   string // "guard/postgres"
	Table string // as configured: "fence_guard", "app.fence_guard"
	Err   error  // the driver's error
}

func (e *MissingTableError) Error() string {
	return fmt.Sprintf("table %s does not exist: call Migrate first (%s.Migrate(ctx, db) for the default tables, "+
		"Guard.Migrate for a Guard from New; Guard.DDL lists the statements for a migration tool): %v",
		e.Table, path.Base(e.Pkg), e.Err)
}

func (e *MissingTableError) Unwrap() error { return e.Err }

// MissingTable wraps err, a driver error whose message msg says a table does
// not exist, in a *MissingTableError when msg names one of tables (as
// configured, schema-qualified or not); otherwise — the missing table is the
// caller's own, or err is already wrapped — it returns err unchanged.
func MissingTable(pkg string, err error, msg string, tables ...string) error {
	var done *MissingTableError
	if errors.As(err, &done) {
		return err
	}
	for _, t := range tables {
		if mentions(msg, t[strings.LastIndexByte(t, '.')+1:]) {
			return &MissingTableError{Pkg: pkg, Table: t, Err: err}
		}
	}
	return err
}

// mentions reports whether msg holds name as a whole identifier: not a part
// of a longer one (fence_guard in fence_guard_old).
func mentions(msg, name string) bool {
	ident := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; ; {
		j := strings.Index(msg[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !ident(msg[start-1])) && (end == len(msg) || !ident(msg[end])) {
			return true
		}
		i = start + 1
	}
}
