package sqlguard

import (
	"fmt"
	"strings"

	"github.com/fenceworks/fence"
)

// MaxIdentBytes is the longest identifier part accepted (PostgreSQL's limit).
const MaxIdentBytes = 63

// ParseIdent splits a table or column name, optionally qualified by one
// schema ("app.fence_guard"), into its parts. Each part must be a plain
// identifier: an ASCII letter or underscore, then letters, digits or
// underscores, at most MaxIdentBytes. Anything else is refused with an
// *fence.InvalidError naming field, so a name can never smuggle SQL in.
func ParseIdent(field, name string) ([]string, error) {
	const bound = "a plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 bytes, optionally schema-qualified)"
	if name == "" {
		return nil, fence.Invalid(field, "not empty", "")
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, fence.Invalid(field, bound, fmt.Sprintf("%q", shorten(name)))
	}
	for _, p := range parts {
		if !plainIdent(p) {
			return nil, fence.Invalid(field, bound, fmt.Sprintf("%q", shorten(name)))
		}
	}
	return parts, nil
}

// Quote joins parts parsed by ParseIdent into a double-quoted SQL name.
// The parts contain no quotes, so no escaping is needed.
func Quote(parts []string) string {
	q := make([]string, len(parts))
	for i, p := range parts {
		q[i] = `"` + p + `"`
	}
	return strings.Join(q, ".")
}

func plainIdent(s string) bool {
	if s == "" || len(s) > MaxIdentBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func shorten(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
