//go:build e2e

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The CLI reads --cacert, --cert and --key (and FENCE_CACERT, ...) within
// the server's bounds: a FIFO or a device is refused at once as "not a
// regular file", a file over 4 MiB by its size, with exit 2 naming the
// flag. (Before: FENCE_CACERT=/dev/zero grew until killed; a FIFO hung.)
func TestCLIRefusesSpecialTLSFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := makeCerts(dir, nil, "server", "client", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ca, crt, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cacert", "/dev/zero"}, "--cacert: /dev/zero is not a regular file"},
		{[]string{"--cacert", fifo}, "--cacert: " + fifo + " is not a regular file"},
		{[]string{"--cacert", ca, "--cert", "/dev/zero", "--key", key}, "/dev/zero is not a regular file"},
		{[]string{"--cacert", ca, "--cert", crt, "--key", fifo}, fifo + " is not a regular file"},
	} {
		done := make(chan struct{})
		var code int
		var stderr string
		go func() {
			defer close(done)
			code, _, stderr = runCLI(append(append([]string{"--server", "127.0.0.1:1"}, tc.args...), "locks")...)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("fence %q did not return: it is reading a special file", tc.args)
		}
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("fence %q: exit %d, stderr %q; want exit %d saying %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}
