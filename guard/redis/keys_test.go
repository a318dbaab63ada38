package redisguard

import (
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
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

// decodeKey inverts resourceKey and opKey: it is the proof that the
// encoding is injective (a key decodes to exactly one prefix, resource and
// op_id).
func decodeKey(t *testing.T, key string) (prefix, resource, opID string, isOp bool) {
	t.Helper()
	colon := strings.IndexByte(key, ':')
	n, err := strconv.Atoi(key[1:colon])
	if key[0] != '{' || err != nil || key[colon+1+n] != ':' {
		t.Fatalf("key %q does not start with {len:prefix:", key)
	}
	prefix = key[colon+1 : colon+1+n]
	rest := key[colon+2+n:]
	end := strings.LastIndexByte(rest, '}')
	resource = rest[:end]
	if tail := rest[end+1:]; tail != "" {
		if !strings.HasPrefix(tail, ":op:") {
			t.Fatalf("key %q: tail %q", key, tail)
		}
		b, err := hex.DecodeString(tail[len(":op:"):])
		if err != nil {
			t.Fatalf("key %q: op_id not hex", key)
		}
		opID, isOp = string(b), true
	}
	return prefix, resource, opID, isOp
}

// Prefix "a" + resource "x:R" and prefix "a:x" + resource "R" once shared
// the key {a:x:R}. Every (prefix, resource, op_id) now has its own keys.
func TestKeysInjectiveAcrossPrefixes(t *testing.T) {
	if resourceKey("a", "x:R") == resourceKey("a:x", "R") {
		t.Fatalf("prefix a + x:R and prefix a:x + R share the key %q", resourceKey("a", "x:R"))
	}
	prefixes := []string{"a", "a:x", "a:x:", "1", "1:a", "fence", "f/e.n-c_e"}
	names := []string{"R", "x:R", "x:", ":R", "}", "R}", "x}:op:6f70", "1:a:R", "{2:a:R}", "ü"}
	ops := []string{"", "op", "}", "op}:x"}
	seen := map[string]string{}
	for _, p := range prefixes {
		for _, r := range names {
			for _, op := range ops {
				k := resourceKey(p, r)
				if op != "" {
					k = opKey(p, r, op)
				}
				who := fmt.Sprintf("(%q, %q, %q)", p, r, op)
				if prev, dup := seen[k]; dup {
					t.Errorf("key %q used by %s and %s", k, prev, who)
				}
				seen[k] = who
				gp, gr, gop, isOp := decodeKey(t, k)
				if gp != p || gr != r || gop != op || isOp != (op != "") {
					t.Errorf("key %q decodes to (%q, %q, %q), want %s", k, gp, gr, gop, who)
				}
				if m, _ := path.Match(scanPattern(p), k); !m {
					t.Errorf("scan pattern %q misses key %q of its prefix", scanPattern(p), k)
				}
				for _, other := range prefixes {
					if m, _ := path.Match(scanPattern(other), k); m && other != p {
						t.Errorf("scan pattern of prefix %q matches key %q of prefix %q", other, k, p)
					}
				}
			}
		}
	}
}

// Against Redis: two guards whose prefix and resource concatenate to the
// same text keep separate tokens.
func TestPrefixesDoNotShareResources(t *testing.T) {
	a, rdb := newTestGuard(t, Options{})
	b, err := New(rdb, Options{Prefix: a.Prefix() + ":x", AcceptVolatile: true, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePrefix(rdb, b.Prefix()) })
	mustSet(t, a, "x:R", 5, "a's", "")
	if _, err := b.Set(ctx, "R", 1, []byte("b's"), ""); err != nil {
		t.Fatalf("prefix %q resource R refused because of prefix %q resource x:R: %v", b.Prefix(), a.Prefix(), err)
	}
	wantState(t, a, "x:R", "a's", 5, 1)
	wantState(t, b, "R", "b's", 1, 1)
	if m, err := MaxToken(ctx, rdb, b.Prefix()); err != nil || m != 1 {
		t.Fatalf("MaxToken(%q) = %d, %v; want 1 (not a's 5)", b.Prefix(), m, err)
	}
}
