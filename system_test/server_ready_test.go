//go:build e2e

package system_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenceworks/fence/testkit/testutil"
)

// A node that cannot take office within --ready-timeout makes `fence serve`
// exit non-zero with a message naming the flag, instead of hanging with its
// port open (1ms is shorter than any election).
func TestServeGivesUpAfterReadyTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, fenceBinary(t), "serve", "--listen", testutil.FreeAddr(t),
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--ready-timeout", "1ms")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("fence serve --ready-timeout 1ms did not exit within %s:\n%s", hangGuard, out)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "--ready-timeout") {
		t.Fatalf("fence serve --ready-timeout 1ms = %v, want exit status 1 naming --ready-timeout:\n%s", err, out)
	}
	checkRaces(t, "fence serve", string(out))
}
