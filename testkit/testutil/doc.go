// Package testutil holds the small helpers that several packages' tests
// share: a buffer safe for concurrent writers, a free loopback address, and
// the PostgreSQL DSN of the tests (skipped without one, failed under CI).
// Only tests import it.
package testutil
