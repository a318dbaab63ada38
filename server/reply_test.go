package server

import "testing"

// mustOK fails the test unless the plain JSON reply r is a 200.
func mustOK(t *testing.T, r reply) {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}
