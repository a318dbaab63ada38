package server

import "testing"

// A refusal's limit names its rule in the metric's label, also when the
// limit says a role may set it (a principal's quotas).
func TestLimitLabelNamesTheRule(t *testing.T) {
	for limit, want := range map[string]string{
		"waiters on one lock (config.max_waiters_per_lock)":                                                  "max_waiters_per_lock",
		`sessions of principal "token:a" (config.max_sessions_per_principal or its roles' quota)`:            "max_sessions_per_principal",
		`remembered op_ids of principal "token:a" (config.max_ids_per_principal or its roles' quota)`:        "max_ids_per_principal",
		`open session streams of principal "token:a" (config.max_streams_per_principal or its roles' quota)`: "max_streams_per_principal",
		"something else": "other",
	} {
		if got := limitLabel(limit); got != want {
			t.Errorf("limitLabel(%q) = %q, want %q", limit, got, want)
		}
	}
}
