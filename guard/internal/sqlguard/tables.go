package sqlguard

import (
	"time"

	"github.com/fenceworks/fence"
)

// Default table names of the SQL guards.
const (
	DefaultTable    = "fence_guard"
	DefaultOpsTable = "fence_ops"
)

// Tables is a SQL guard's configuration with the defaults applied and every
// name checked: what a Dialect builds its statements from.
type Tables struct {
	Table     []string // the guard table, identifier parts (schema-qualified allowed)
	Ops       []string // the op-record table, identifier parts
	OpsIndex  string   // unqualified name of the op table's created_at index
	Retention time.Duration
}

// ResolveTables applies the defaults (DefaultTable, DefaultOpsTable,
// DefaultRetention) to the given options and checks them: a name that is
// not a plain identifier, or a negative retention, is refused with
// *fence.InvalidError naming the field.
func ResolveTables(table, opsTable string, retention time.Duration) (Tables, error) {
	if table == "" {
		table = DefaultTable
	}
	if opsTable == "" {
		opsTable = DefaultOpsTable
	}
	if retention == 0 {
		retention = DefaultRetention
	}
	if retention < 0 {
		return Tables{}, InvalidRetention(retention)
	}
	t, err := ParseIdent("table", table)
	if err != nil {
		return Tables{}, err
	}
	ops, err := ParseIdent("ops_table", opsTable)
	if err != nil {
		return Tables{}, err
	}
	idx := ops[len(ops)-1] + "_created_at_idx"
	if len(idx) > MaxIdentBytes {
		idx = idx[:MaxIdentBytes]
	}
	return Tables{Table: t, Ops: ops, OpsIndex: idx, Retention: retention}, nil
}

// InvalidRetention is the refusal of a negative retention or prune age.
func InvalidRetention(d time.Duration) error {
	return fence.Invalid("retention", "at least 0s", d.String())
}
