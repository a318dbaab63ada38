//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fence backup FILE renames its new file over FILE: a FILE that exists and
// is not a regular file (a device, a named pipe, a symbolic link such as
// /dev/stdout, a directory) is refused, exit 2, and left as it was — as
// root, `fence backup /dev/full` once replaced the device with a regular
// file. A regular file is still replaced, and "-" still writes to stdout.
func TestBackupRefusesTargetsItWouldReplace(t *testing.T) {
	srv := startServe(t)
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	targets := []struct{ path, what string }{
		{fifo, "a named pipe"},
		{link, "a symbolic link"},
		{dir, "a directory"},
	}
	// A character device like /dev/null (1, 3), made where root may.
	if dev := filepath.Join(dir, "null"); syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(1<<8|3)) == nil {
		targets = append(targets, struct{ path, what string }{dev, "a device"})
	} else if os.Getuid() == 0 {
		t.Logf("mknod refused here: the device case is not run")
	}
	for _, tc := range targets {
		before, err := os.Lstat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		r := fenceRun(t, srv.url, "backup", tc.path).want(t, exitUsage, "backup to "+tc.what)
		if !strings.Contains(r.stderr, tc.what) || !strings.Contains(r.stderr, "fence backup - >") {
			t.Errorf("backup to %s: stderr %q, want it named and the redirect given", tc.what, r.stderr)
		}
		after, err := os.Lstat(tc.path)
		if err != nil {
			t.Fatalf("%s is gone after the refused backup: %v", tc.path, err)
		}
		if after.Mode() != before.Mode() {
			t.Errorf("%s was %v, is %v after the refused backup", tc.path, before.Mode(), after.Mode())
		}
	}
	if b, _ := os.ReadFile(regular); string(b) != "old" {
		t.Errorf("the symlink's target was changed: %q", b)
	}
	// A regular file is replaced, as before.
	fenceRun(t, srv.url, "backup", regular).want(t, exitOK, "backup to a regular file")
	if b, _ := os.ReadFile(regular); !strings.HasPrefix(string(b), "FENCE-BACKUP") {
		t.Errorf("the regular file was not replaced by the backup: %q", b[:min(len(b), 20)])
	}
}
