//go:build plantbug

package plant

import (
	"fmt"
	"os"
	"strings"
)

// marker is in every plantbug binary (the start message uses it) and in no
// release binary: TestReleaseHasNoPlantedCode looks for it.
const marker = "fence-plantbug-active"

// active holds the faults that are on, read once from FENCE_PLANTBUG at
// start and never written again.
var active = mustParse(os.Getenv(EnvVar))

func init() {
	if len(active) > 0 {
		fmt.Fprintf(os.Stderr, "%s: planted bugs %s=%s are ON (a -tags plantbug build, never for production)\n",
			marker, EnvVar, os.Getenv(EnvVar))
	}
}

// On reports whether fault b is switched on by FENCE_PLANTBUG.
func On(b Bug) bool { return active[b] }

// mustParse is parse, panicking on an unknown name: a run asked for a fault
// this binary does not have must not run without it.
func mustParse(s string) map[Bug]bool {
	m, err := parse(s)
	if err != nil {
		panic(marker + ": " + err.Error())
	}
	return m
}

// parse reads a comma-separated list of fault names (spaces around a name
// and empty names are ignored).
func parse(s string) (map[Bug]bool, error) {
	m := map[Bug]bool{}
	for _, f := range strings.Split(s, ",") {
		name := Bug(strings.TrimSpace(f))
		if name == "" {
			continue
		}
		if !known(name) {
			names := make([]string, len(Bugs))
			for i, b := range Bugs {
				names[i] = string(b)
			}
			return nil, fmt.Errorf("%s=%q: unknown planted bug %q (known: %s)", EnvVar, s, name, strings.Join(names, ", "))
		}
		m[name] = true
	}
	return m, nil
}

func known(b Bug) bool {
	for _, k := range Bugs {
		if k == b {
			return true
		}
	}
	return false
}
