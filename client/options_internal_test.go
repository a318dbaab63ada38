package client

import (
	"testing"
	"time"
)

func TestJitterWithinBounds(t *testing.T) {
	for _, pause := range []time.Duration{25 * time.Millisecond, time.Second, 3} {
		lo, hi := pause, time.Duration(0)
		for range 2000 {
			j := jitter(pause)
			if j < pause/2 || j > pause {
				t.Fatalf("jitter(%v) = %v, want within [%v, %v]", pause, j, pause/2, pause)
			}
			lo, hi = min(lo, j), max(hi, j)
		}
		if pause >= time.Millisecond && (lo > pause/2+pause/10 || hi < pause-pause/10) {
			t.Errorf("jitter(%v) ranged over [%v, %v] in 2000 draws: not spread over [%v, %v]", pause, lo, hi, pause/2, pause)
		}
	}
}

func TestOptionsDefaultsAndBounds(t *testing.T) {
	cfg := defaultConfig()
	if cfg.backoffMin != 25*time.Millisecond || cfg.backoffMax != time.Second || cfg.attemptTimeout != 10*time.Second || cfg.failFast {
		t.Fatalf("defaults %+v", cfg)
	}
	apply := func(opts ...Option) config {
		cfg := defaultConfig()
		for _, o := range opts {
			o(&cfg)
		}
		return cfg
	}
	cases := []struct {
		name     string
		opt      Option
		min, max time.Duration
		attempt  time.Duration
	}{
		{"both", WithBackoff(10*time.Millisecond, 2*time.Second), 10 * time.Millisecond, 2 * time.Second, 10 * time.Second},
		{"first 0 keeps the default", WithBackoff(0, 2*time.Second), 25 * time.Millisecond, 2 * time.Second, 10 * time.Second},
		{"negative first keeps the default", WithBackoff(-time.Second, 2*time.Second), 25 * time.Millisecond, 2 * time.Second, 10 * time.Second},
		{"most equal to first", WithBackoff(50*time.Millisecond, 50*time.Millisecond), 50 * time.Millisecond, 50 * time.Millisecond, 10 * time.Second},
		{"most below first keeps the default", WithBackoff(50*time.Millisecond, 40*time.Millisecond), 50 * time.Millisecond, time.Second, 10 * time.Second},
		{"attempt timeout", WithAttemptTimeout(time.Nanosecond), 25 * time.Millisecond, time.Second, time.Nanosecond},
		{"attempt timeout 0 keeps the default", WithAttemptTimeout(0), 25 * time.Millisecond, time.Second, 10 * time.Second},
		{"negative attempt timeout keeps the default", WithAttemptTimeout(-time.Second), 25 * time.Millisecond, time.Second, 10 * time.Second},
	}
	for _, tc := range cases {
		cfg := apply(tc.opt)
		if cfg.backoffMin != tc.min || cfg.backoffMax != tc.max || cfg.attemptTimeout != tc.attempt {
			t.Errorf("%s: backoff [%v, %v] attempt %v, want [%v, %v] %v", tc.name, cfg.backoffMin, cfg.backoffMax, cfg.attemptTimeout, tc.min, tc.max, tc.attempt)
		}
	}
	if !apply(WithFailFast()).failFast {
		t.Error("WithFailFast not applied")
	}
}

// TestIntervalIsKeepAliveOrTTLThird: the keepalive period.
func TestIntervalIsKeepAliveOrTTLThird(t *testing.T) {
	for _, tc := range []struct{ keepAlive, ttl, want time.Duration }{
		{0, 3 * time.Second, time.Second},
		{50 * time.Millisecond, 3 * time.Second, 50 * time.Millisecond},
		{time.Nanosecond, 3 * time.Second, time.Nanosecond},
	} {
		l := &Lease{leaseExtra: &leaseExtra{keepAlive: tc.keepAlive, ttl: tc.ttl}}
		if got := l.interval(); got != tc.want {
			t.Errorf("interval(keepAlive %v, ttl %v) = %v, want %v", tc.keepAlive, tc.ttl, got, tc.want)
		}
	}
}
