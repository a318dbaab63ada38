// Package buildinfo names the fence version a binary runs.
package buildinfo

import "runtime/debug"

// version may be set at build time with
// -ldflags "-X github.com/fenceworks/fence/internal/buildinfo.version=v1.2.3".
var version = ""

// Version is the version set at build time, else the main module's version
// from the build info, else "(devel)".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
