//go:build e2e

package phpstock

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/testkit/harness"
)

// TestPHPProofVectors: lib/FenceProof.php gives every case of the
// cross-language vectors (testdata/proof-vectors.json, checked against Go's
// ParseSignedToken and KeySet.Verify by the root package's
// TestProofVectors) Go's verdict.
func TestPHPProofVectors(t *testing.T) {
	php := requirePHP(t)
	out, err := exec.Command(php, "tests/proof_vectors.php", filepath.Join("..", "..", "testdata", "proof-vectors.json")).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok ") {
		t.Fatalf("php tests/proof_vectors.php: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// fakeFence answers the worker's JSON calls (Acquire, Get, Release) with
// the grant the test sets: a token and the signed token the reply carries
// (none when empty). It stands in for a server that signs its grants, to
// hand the worker forged ones.
type fakeFence struct {
	mu     sync.Mutex
	token  fence.Token
	signed string
}

func (f *fakeFence) grant(token fence.Token, signed string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token, f.signed = token, signed
}

func (f *fakeFence) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	token, signed := f.token, f.signed
	f.mu.Unlock()
	var req struct {
		Name  string `json:"name"`
		Owner string `json:"owner"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var reply any
	switch r.URL.Path {
	case "/fence.v1.LockService/Acquire":
		lease := map[string]any{"name": req.Name, "owner": req.Owner, "token": uint64(token), "ttl": "30s", "remaining": "30s"}
		if signed != "" {
			lease["signedToken"] = signed
		}
		reply = map[string]any{"lease": lease}
	case "/fence.v1.LockService/Get":
		reply = map[string]any{"lock": map[string]any{"name": req.Name, "lastToken": uint64(token)}}
	case "/fence.v1.LockService/Release":
		reply = map[string]any{}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(reply)
}

// TestPHPWorkerVerifiesProof: the worker given a key set (--keys, the
// JSON of `fence keys --json`) verifies the lease's signed token before its
// MySQL transaction. A valid proof is written; a token with a flipped
// byte, another lock's proof, another cluster's proof, an unknown key, a
// huge never-issued token with no proof or with a made-up one, a reply
// without a proof, and a proof of another token than the lease's are each
// refused (FORGED_TOKEN, exit 4) with the stock and the guard row
// unchanged. --allow-unsigned lets a reply without a proof through; and a
// worker without a key set (the control) believes a bare 2^53-1, which
// poisons the guard row.
//
// The grants come from a fake server (fakeFence), which can hand out forged
// ones; TestPHPWorkerVerifiesServerProof runs the worker against real
// servers' proofs.
func TestPHPWorkerVerifiesProof(t *testing.T) {
	php := requirePHP(t)
	db := testDB(t)
	suffix := randomSuffix(t)
	stockTable, guardTable, opsTable := "php_stock_"+suffix, "php_guard_"+suffix, "php_ops_"+suffix
	t.Cleanup(func() {
		for _, tbl := range []string{stockTable, guardTable, opsTable} {
			db.Exec("DROP TABLE IF EXISTS `" + tbl + "`")
		}
	})
	key := func(label string) ed25519.PrivateKey {
		seed := sha256.Sum256([]byte("php worker test: " + label))
		return ed25519.NewKeyFromSeed(seed[:])
	}
	const cluster, foreign, sku = "c-prod", "c-staging", "sku-9"
	lockName := "stock/" + sku
	signing, stranger := key("signing"), key("stranger")
	pub := signing.Public().(ed25519.PublicKey)
	ks, err := json.Marshal(&fence.KeySet{ClusterID: cluster, Keys: []fence.PublicKey{{ID: fence.KeyIDOf(pub), Key: pub}}})
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(t.TempDir(), "fence-keys.json")
	if err := os.WriteFile(keysFile, ks, 0o644); err != nil {
		t.Fatal(err)
	}

	fake := &fakeFence{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	worker := func(name string, qty int, args ...string) *proc {
		args = append([]string{"worker.php", "--server", srv.URL, "--dsn", phpDSN(t),
			"--stock-table", stockTable, "--guard-table", guardTable, "--ops-table", opsTable, "--sku", sku,
			"--owner", "worker", "--qty", strconv.Itoa(qty)}, args...)
		return startProc(t, name, php, args...)
	}
	stockRow := func() (qty int, last int64) {
		t.Helper()
		if err := db.QueryRow("SELECT qty FROM `"+stockTable+"` WHERE sku = ?", sku).Scan(&qty); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("SELECT last_token FROM `"+guardTable+"` WHERE resource = ?", lockName).Scan(&last); err != nil {
			t.Fatal(err)
		}
		return qty, last
	}

	// A valid proof: verified, written.
	good := fence.Sign(signing, cluster, lockName, 5)
	fake.grant(5, good.String())
	w := worker("signed worker", 8, "--keys", keysFile)
	w.expect("acquired")
	if got := w.expect("verified"); got["token"] != "5" || got["cluster"] != cluster || got["key"] != good.KeyID {
		t.Fatalf("worker with a valid proof: %v, want verified token=5 cluster=%s key=%s", got, cluster, good.KeyID)
	}
	if got := w.expect("written"); got["qty"] != "8" || got["token"] != "5" {
		t.Fatalf("worker with a valid proof: %v, want written qty=8 token=5", got)
	}
	w.expect("released")
	w.wait(0)
	if qty, last := stockRow(); qty != 8 || last != 5 {
		t.Fatalf("after the valid write: stock %d, guard last_token %d; want 8 and 5", qty, last)
	}

	const huge = fence.Token(1<<53 - 1)
	flipped := fence.Sign(signing, cluster, lockName, 6)
	flipped.Signature[10] ^= 0x01
	madeUp := fence.SignedToken{Token: huge, ClusterID: cluster, KeyID: good.KeyID, Signature: make([]byte, ed25519.SignatureSize)}
	for _, c := range []struct {
		name   string
		token  fence.Token
		signed string // "" for a reply without a proof
		kind   string
	}{
		{"a flipped byte", 6, flipped.String(), "does-not-hold"},
		{"another lock's proof", 6, fence.Sign(signing, cluster, "stock/sku-10", 6).String(), "does-not-hold"},
		{"another cluster's proof", 6, fence.Sign(stranger, foreign, lockName, 6).String(), "another-cluster"},
		{"an unknown key", 6, fence.Sign(stranger, cluster, lockName, 6).String(), "unknown-key"},
		{"a huge never-issued token, no proof", huge, strconv.FormatUint(uint64(huge), 10), "no-proof"},
		{"a huge never-issued token, a made-up proof", huge, madeUp.String(), "does-not-hold"},
		{"a reply without a proof", 6, "", "no-proof"},
		{"a proof of another token than the lease's", 6, fence.Sign(signing, cluster, lockName, 7).String(), "token-mismatch"},
		{"a signature that is not base64url", 6, notBase64URL(fence.Sign(signing, cluster, lockName, 6)), "malformed"},
	} {
		fake.grant(c.token, c.signed)
		w := worker(c.name, 1, "--keys", keysFile)
		w.expect("acquired")
		got := w.expect("refused")
		wantReason := "FORGED_TOKEN"
		if c.kind == "malformed" {
			wantReason = "INVALID_ARGUMENT"
		}
		if got["reason"] != wantReason || got["kind"] != c.kind || got["token"] != strconv.FormatUint(uint64(c.token), 10) {
			t.Fatalf("%s: %v, want refused reason=%s kind=%s token=%d", c.name, got, wantReason, c.kind, c.token)
		}
		w.expect("released")
		w.wait(4)
		if qty, last := stockRow(); qty != 8 || last != 5 {
			t.Fatalf("%s: stock %d, guard last_token %d; want both unchanged (8 and 5)", c.name, qty, last)
		}
	}

	// --allow-unsigned (migration): a reply without a proof is compared.
	fake.grant(6, "")
	w = worker("unsigned worker", 3, "--keys", keysFile, "--allow-unsigned")
	w.expect("acquired")
	w.expect("unsigned")
	if got := w.expect("written"); got["token"] != "6" {
		t.Fatalf("--allow-unsigned: %v, want written token=6", got)
	}
	w.expect("released")
	w.wait(0)

	// The control: without a key set nothing is verified, and a bare
	// 2^53-1 is accepted — the guard row is poisoned.
	fake.grant(huge, fmt.Sprint(uint64(huge)))
	w = worker("worker without keys", 1)
	w.expect("acquired")
	w.expect("written")
	w.expect("released")
	w.wait(0)
	if _, last := stockRow(); last != int64(huge) {
		t.Fatalf("without a key set: guard last_token %d, want the poisoned %d", last, huge)
	}
}

// notBase64URL is st's text form with the signature's last character made
// one that is not base64url.
func notBase64URL(st fence.SignedToken) string {
	s := st.String()
	return s[:len(s)-1] + "!"
}

// TestPHPWorkerVerifiesServerProof: the worker against two real `fence
// serve` processes, "prod" and "staging" (two clusters, each with its own
// signing key). Given prod's key set (GET /v1/keys, what `fence keys
// --json` prints), a prod grant's signed token verifies in PHP and is
// written; given staging's, the same grant is refused as another cluster's
// (FORGED_TOKEN, exit 4) and the guard row is unchanged.
func TestPHPWorkerVerifiesServerProof(t *testing.T) {
	php := requirePHP(t)
	db := testDB(t)
	suffix := randomSuffix(t)
	stockTable, guardTable, opsTable := "php_stock_"+suffix, "php_guard_"+suffix, "php_ops_"+suffix
	t.Cleanup(func() {
		for _, tbl := range []string{stockTable, guardTable, opsTable} {
			db.Exec("DROP TABLE IF EXISTS `" + tbl + "`")
		}
	})
	prod := harness.StartT(t, harness.Config{})
	staging := harness.StartT(t, harness.Config{})
	prodKeys, prodCluster := serverKeySet(t, prod.URL())
	stagingKeys, _ := serverKeySet(t, staging.URL())
	const sku = "sku-3"
	lockName := "stock/" + sku
	worker := func(name, keys string, qty int) *proc {
		return startProc(t, name, php, "worker.php", "--server", prod.URL(), "--dsn", phpDSN(t),
			"--stock-table", stockTable, "--guard-table", guardTable, "--ops-table", opsTable, "--sku", sku,
			"--owner", "worker", "--qty", strconv.Itoa(qty), "--keys", keys)
	}
	lastToken := func() (last int64) {
		t.Helper()
		if err := db.QueryRow("SELECT last_token FROM `"+guardTable+"` WHERE resource = ?", lockName).Scan(&last); err != nil {
			t.Fatal(err)
		}
		return last
	}

	w := worker("worker with prod's keys", prodKeys, 8)
	token := w.expect("acquired")["token"]
	if got := w.expect("verified"); got["token"] != token || got["cluster"] != prodCluster {
		t.Fatalf("worker with prod's keys: %v, want verified token=%s cluster=%s", got, token, prodCluster)
	}
	if got := w.expect("written"); got["token"] != token {
		t.Fatalf("worker with prod's keys: %v, want written token=%s", got, token)
	}
	w.expect("released")
	w.wait(0)
	written := lastToken()

	w = worker("worker with staging's keys", stagingKeys, 1)
	w.expect("acquired")
	if got := w.expect("refused"); got["reason"] != "FORGED_TOKEN" || got["kind"] != "another-cluster" {
		t.Fatalf("prod's grant checked with staging's key set: %v, want refused reason=FORGED_TOKEN kind=another-cluster", got)
	}
	w.expect("released")
	w.wait(4)
	if last := lastToken(); last != written {
		t.Fatalf("after the refused write: guard last_token %d, want %d unchanged", last, written)
	}
}

// serverKeySet writes the key set the server at url publishes (GET
// /v1/keys) to a file and returns its path and the cluster id.
func serverKeySet(t *testing.T, url string) (path, clusterID string) {
	t.Helper()
	resp, err := http.Get(url + "/v1/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := fence.ParseKeySet(body)
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/keys: %s, %v\n%s", resp.Status, err, body)
	}
	path = filepath.Join(t.TempDir(), "fence-keys.json")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, ks.ClusterID
}
