package main

import (
	"strings"
	"testing"
)

// A negative --timeout is refused as a usage error (0 is no limit); it was
// taken as no limit.
func TestNegativeTimeoutRefused(t *testing.T) {
	for _, cmd := range [][]string{{"locks"}, {"backup", "out.backup"}, {"status"}} {
		var out, errb strings.Builder
		code := run(append(cmd, "--timeout", "-1s", "--server", "127.0.0.1:1"), &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), "--timeout must be at least 0") {
			t.Errorf("%v --timeout -1s: exit %d, stderr %q; want %d naming --timeout", cmd, code, errb.String(), exitUsage)
		}
	}
}
