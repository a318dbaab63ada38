//go:build e2e

// Package system_test holds Fence's end-to-end tests: they build the real
// `fence` binary and helper programs, start servers as separate processes on
// free loopback ports in temporary directories, and drive them over the
// network with real signals (SIGSTOP, SIGCONT, SIGTERM, SIGKILL).
//
// The tests here check the guarantees of docs/design.md §1 from outside:
//
//   - TestStoryPauseStaleWrite (G4): the story's paused worker is refused.
//   - TestCrashKill9 (G1, G6): kill -9 under load, restart, compare tokens
//     and acknowledged writes.
//   - TestBadInput (G7): every refused input over JSON and gRPC.
//   - TestReadmeCurl: the curl tour of README.md runs as written.
//   - TestStockWorker (G4, G5): examples/stock-worker on a real PostgreSQL.
//
// PostgreSQL is found through FENCE_TEST_POSTGRES, else
// postgres://postgres@127.0.0.1:5432/test; when it does not answer, the test
// skips loudly, except under CI=true, where it fails.
package system_test
