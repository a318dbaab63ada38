package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/fenceworks/fence/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise it comes from the module's build info.
var version = ""

func versionCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newLocalFlagSet("version", "", g, stderr)
	if _, err := parseExact(fs, args); err != nil {
		return usageExit(err)
	}
	v := version
	if v == "" {
		v = buildinfo.Version() // what fence status reports of a server
	}
	emit(g, stdout, fmt.Sprintf("fence %s %s", v, runtime.Version()),
		map[string]string{"version": v, "go": runtime.Version()})
	return exitOK
}
