//go:build e2e

package server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAPIDocTokens99And100 runs the snippets of docs/api.md, "Tokens 99 and
// 100" — JavaScript (node), Python, PHP (php with curl) and Go — against a
// real server where A held token 99 and B holds 100 and wrote: each must
// print the refusal of A's write with the last token as an integer. A
// runtime that is not installed is skipped loudly (CI=true: failed).
func TestAPIDocTokens99And100(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	i := strings.Index(section, "### Tokens 99 and 100")
	if i < 0 {
		t.Fatal(`docs/api.md has no "### Tokens 99 and 100"`)
	}
	section = section[i:]
	if j := strings.Index(section[4:], "\n## "); j >= 0 {
		section = section[:j+4]
	}
	snippet := func(lang string) string {
		m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(section)
		if m == nil {
			t.Fatalf("docs/api.md: no %s snippet under Tokens 99 and 100", lang)
		}
		return m[1]
	}

	_, url := startServer(t)
	for tok := 1; tok <= 98; tok++ {
		mustOK(t, sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"burn","owner":"x","ttl":5}`))
		mustOK(t, sendJSON(t, url, "/fence.v1.LockService/Release", fmt.Sprintf(`{"name":"burn","token":%d}`, tok)))
	}
	mustOK(t, sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"sku-42","owner":"A","ttl":60}`))
	mustOK(t, sendJSON(t, url, "/fence.v1.LockService/Release", `{"name":"sku-42","token":99}`))
	mustOK(t, sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"sku-42","owner":"B","ttl":60}`))
	mustOK(t, sendJSON(t, url, "/fence.v1.ResourceService/Write", `{"resource":"stock","token":100,"text":"8"}`))

	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		lang, bin string
		args      func() []string
		want      string
	}{
		{"js", "node", func() []string {
			return []string{write("doc.mjs", "const url = "+fmt.Sprintf("%q", url)+";\n"+snippet("js"))}
		}, "STALE_TOKEN 100\n"},
		{"python", "python3", func() []string {
			return []string{write("doc.py", "url = "+fmt.Sprintf("%q", url)+"\n"+snippet("python"))}
		}, "STALE_TOKEN 100\n"},
		{"php", "php", func() []string {
			return []string{write("doc.php", "<?php\n$url = "+fmt.Sprintf("%q", url)+";\n"+snippet("php"))}
		}, "STALE_TOKEN 100\n"},
		{"go", "go", func() []string {
			src := "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n\t\"net/http\"\n\t\"strings\"\n)\n\nfunc main() {\n\turl := " +
				fmt.Sprintf("%q", url) + "\n" + snippet("go") + "}\n"
			return []string{"run", write("main.go", src)}
		}, "STALE_TOKEN true\n"},
	}
	for _, tc := range cases {
		t.Run(tc.lang, func(t *testing.T) {
			if _, err := exec.LookPath(tc.bin); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("CI=true and %s is not installed: the %s snippet of docs/api.md cannot be run", tc.bin, tc.lang)
				}
				t.Skipf("SKIP !!! %s is not installed: the %s snippet of docs/api.md did NOT run", tc.bin, tc.lang)
			}
			cmd := exec.Command(tc.bin, tc.args()...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != tc.want {
				t.Fatalf("%s snippet: %v, output %q; want %q", tc.lang, err, out, tc.want)
			}
		})
	}
}
