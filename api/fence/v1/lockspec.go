package fencev1

import "github.com/fenceworks/fence"

// ModeText is a lock mode as the wire carries it: "" for fence.Exclusive
// (the default, absent in JSON), else its name. The client and the server
// both write modes with it.
func ModeText(m fence.Mode) string {
	if m == fence.Exclusive {
		return ""
	}
	return m.String()
}

// LockSpecsOf is specs on the wire (nil for none).
func LockSpecsOf(specs []fence.LockSpec) []*LockSpec {
	if len(specs) == 0 {
		return nil
	}
	out := make([]*LockSpec, len(specs))
	for i, s := range specs {
		out[i] = &LockSpec{Name: s.Name, Mode: ModeText(s.Mode), Permits: s.Permits}
	}
	return out
}
