package main

import (
	"fmt"
	"strconv"
	"strings"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// quotaKinds are the KIND of `fence role quota ROLE KIND=N`, in the
// order they are printed.
var quotaKinds = []string{"sessions", "waiters", "ids", "conns", "streams", "locks"}

// quotaField is the field of q that kind names.
func quotaField(q *fencev1.RoleQuota, kind string) *uint32 {
	switch kind {
	case "sessions":
		return &q.Sessions
	case "waiters":
		return &q.Waiters
	case "ids":
		return &q.Ids
	case "conns":
		return &q.Conns
	case "streams":
		return &q.Streams
	case "locks":
		return &q.Locks
	}
	return nil
}

// parseRoleQuota reads KIND=N arguments; the server bounds N.
func parseRoleQuota(args []string) (*fencev1.RoleQuota, error) {
	q := &fencev1.RoleQuota{}
	seen := map[string]bool{}
	for _, a := range args {
		kind, num, ok := strings.Cut(a, "=")
		f := quotaField(q, kind)
		if !ok || f == nil {
			return nil, &usageError{fmt.Sprintf("role quota: %q: want KIND=N with KIND one of %s", a, strings.Join(quotaKinds, ", "))}
		}
		if seen[kind] {
			return nil, &usageError{fmt.Sprintf("role quota: %s given twice", kind)}
		}
		seen[kind] = true
		n, err := strconv.ParseUint(num, 10, 32)
		if err != nil {
			return nil, &usageError{fmt.Sprintf("role quota: %s=%q: want a number from 0 to %d", kind, num, uint32(1<<32-1))}
		}
		*f = uint32(n)
	}
	return q, nil
}

// quotaText is "sessions=500 ids=2000000", or "(server defaults)".
func quotaText(q *fencev1.RoleQuota) string {
	var parts []string
	for _, k := range quotaKinds {
		if q != nil {
			if v := *quotaField(q, k); v != 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", k, v))
			}
		}
	}
	if len(parts) == 0 {
		return "(server defaults)"
	}
	return strings.Join(parts, " ")
}

// quotaJSON is q for --json: the kinds a role sets (an empty object when
// none).
func quotaJSON(q *fencev1.RoleQuota) map[string]uint32 {
	out := map[string]uint32{}
	for _, k := range quotaKinds {
		if q != nil {
			if v := *quotaField(q, k); v != 0 {
				out[k] = v
			}
		}
	}
	return out
}
