package daemon

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
)

// A certificate, key or CA file replaced by something that is not a
// regular file of reasonable size — a FIFO, a link to /dev/zero — fails
// its reload at once with an error naming it, and the server keeps
// serving with the last good files. (Outside attack: a FIFO hung every
// handshake that looked at it, for good; /dev/zero ran the server out of
// memory.)
func TestTLSReloadRefusesSpecialFiles(t *testing.T) {
	p := newPKI(t)
	d, addr := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustedCAFile: p.caFile})
	url := "https://" + addr
	ok := []client.Option{client.WithTLS(p.clientTLS()), client.WithoutSession()}
	if err := acquireOnce(t, url, ok...); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{p.certFile, p.keyFile, p.caFile} {
		good, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for name, mk := range map[string]func() error{
			"fifo":      func() error { return syscall.Mkfifo(file, 0o644) },
			"/dev/zero": func() error { return os.Symlink("/dev/zero", file) },
		} {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			if err := mk(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- d.ReloadTLS() }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatalf("%s as %s: reload succeeded", name, file)
				}
			case <-time.After(hangGuard):
				t.Fatalf("%s as %s: reload hung", name, file)
			}
			if err := acquireOnce(t, url, ok...); err != nil {
				t.Fatalf("%s as %s: the server stopped serving: %v", name, file, err)
			}
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, good, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}
