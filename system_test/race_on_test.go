//go:build e2e && race

package system_test

// raceEnabled: the tests run with -race, so the programs they start are
// built with -race too, and a data race in the server fails the test.
const raceEnabled = true
