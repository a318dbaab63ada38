package daemon

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// DefaultConfig validates; each setting outside its bound is refused with
// an *fence.InvalidError naming config.<setting>, before anything is
// opened or created.
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, tc := range []struct {
		field string
		set   func(*Config)
	}{
		{"config.ready_timeout", func(c *Config) { c.ReadyTimeout = 0 }},
		{"config.write_timeout", func(c *Config) { c.WriteTimeout = -time.Second }},
		{"config.max_conns", func(c *Config) { c.MaxConns = 0 }},
		{"config.max_reply_bytes", func(c *Config) { c.MaxReplyBytes = -1 }},
		{"config.log_store", func(c *Config) { c.LogStore = "bolt" }},
		{"config.listen", func(c *Config) { c.Listen = "notanaddr" }},
		{"config.listen", func(c *Config) { c.Listen = "127.0.0.1:" }},
		{"config.listen", func(c *Config) { c.Listen = "127.0.0.1:65536" }},
		{"config.cluster.raft_addr", func(c *Config) { c.Cluster.RaftAddr = "127.0.0.1:99999" }},
		{"config.max_lock_delay", func(c *Config) { c.Rules.MaxLockDelay = 25 * time.Hour }},
		{"config.max_ttl", func(c *Config) { c.Rules.MaxTTL = time.Millisecond }},
	} {
		c := DefaultConfig()
		tc.set(&c)
		var inv *fence.InvalidError
		if err := c.Validate(); !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an InvalidError naming it", tc.field, err)
		}
	}
	for _, ok := range []string{":7420", "127.0.0.1:0", "[::1]:7420", "localhost:7420"} {
		c := DefaultConfig()
		c.Listen = ok
		if err := c.Validate(); err != nil {
			t.Errorf("listen %q: %v", ok, err)
		}
	}
}
