package main

// This placeholder stands in for guard.go until the guards engineer lands it.
// Guards engineer: delete this file when you add cmd/fence/guard.go with
// func guardCmd(args []string, stdout, stderr io.Writer) int — main already
// dispatches "fence guard ..." to it.

import (
	"fmt"
	"io"
)

func guardCmd(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "fence guard: not built into this binary yet")
	return exitError
}
