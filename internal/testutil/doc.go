// Package testutil holds the small helpers that several packages' tests
// share: a buffer safe for concurrent writers, and a free loopback address.
// Only tests import it.
package testutil
