//go:build race

package harness

// RaceEnabled: this binary was built with -race, so the programs the
// harness builds for it are built with -race too (see Build).
const RaceEnabled = true
