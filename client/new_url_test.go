package client_test

import (
	"strings"
	"testing"

	"github.com/fenceworks/fence/client"
)

// TestNewRefusesBadURL: only http:// and https:// URLs with a host.
func TestNewRefusesBadURL(t *testing.T) {
	for _, u := range []string{"127.0.0.1:7420", "ftp://h:1", "http://", "https:///path", "://x", ""} {
		if _, err := client.New(u); err == nil || !strings.Contains(err.Error(), "want a URL like") {
			t.Errorf("New(%q) = %v, want a refusal", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:7420", "https://fence.example:443/base"} {
		if _, err := client.New(u); err != nil {
			t.Errorf("New(%q) = %v", u, err)
		}
	}
}
