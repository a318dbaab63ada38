//go:build e2e && !race

package system_test

const raceEnabled = false
