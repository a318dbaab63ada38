// Package freeport hands out free loopback addresses for tests and test
// harnesses, never the same one twice in a process. It imports nothing of
// Fence's, so any test helper (testkit/testutil, testkit/harness, the
// bench module's runner) can use it without pulling in the others'
// dependencies.
package freeport
