package redisguard

import (
	"strings"
	"testing"
)

// crc16 is Redis Cluster's CRC16 (XMODEM), to compute key slots.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot follows the Redis Cluster spec: hash only the first {...} if it is
// not empty.
func slot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return crc16([]byte(key)) % 16384
}

func TestKeysShareOneClusterSlot(t *testing.T) {
	if got := crc16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("crc16 check value = %#x, want 0x31c3", got)
	}
	for _, res := range []string{"sku-42", "a}b", "}", "{x}", "ü/日本", "x}:op:00"} {
		for _, op := range []string{"1", "}", "op}:x", ""} {
			rk, ok := resourceKey("fence", res), opKey("fence", res, op)
			if slot(rk) != slot(ok) {
				t.Errorf("resource %q op %q: keys %q and %q in slots %d and %d", res, op, rk, ok, slot(rk), slot(ok))
			}
		}
	}
}

func TestKeysNeverCollide(t *testing.T) {
	seen := map[string]string{}
	names := []string{"x", "x}", "x}:op:", "x}:op:6f70", "x}:op:6f70}", "6f70", "op"}
	for _, res := range names {
		for _, k := range []string{resourceKey("p", res), opKey("p", res, "op"), opKey("p", res, "}")} {
			who := res
			if prev, dup := seen[k]; dup {
				t.Errorf("key %q used by %q and %q", k, prev, who)
			}
			seen[k] = who
		}
	}
}
