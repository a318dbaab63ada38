package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fenceworks/fence/bench"
)

// runSoak runs the soak mode: prints the report, and with docs rewrites
// its "soak" section. It fails (1) when a target failed.
func runSoak(ctx context.Context, cfg bench.Config, scfg bench.SoakConfig, docs, command string) int {
	res, err := bench.RunSoak(ctx, scfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencebench: soak:", err)
		if res == nil {
			return 1
		}
	}
	rel := func(p string) string {
		if p == "" || docs == "" {
			return p
		}
		a, _ := filepath.Abs(p)
		d, _ := filepath.Abs(filepath.Dir(docs))
		if r, err := filepath.Rel(d, a); err == nil {
			return filepath.ToSlash(r)
		}
		return p
	}
	md := bench.SoakMarkdown(res, bench.Environment(cfg), command, rel(scfg.SVG), rel(scfg.CSV))
	fmt.Print(md)
	for _, c := range res.Checks {
		r := "PASS"
		if !c.Pass {
			r = "FAIL"
		}
		fmt.Fprintf(os.Stderr, "soak: %s  %s: %s\n", r, c.Name, c.Detail)
	}
	if docs != "" {
		if err := bench.WriteNamedSection(docs, "soak", md); err != nil {
			fmt.Fprintln(os.Stderr, "fencebench:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "fencebench: wrote the soak section of %s (%s)\n", docs, time.Now().UTC().Format(time.RFC3339))
	}
	if err != nil || !res.Passed() {
		return 1
	}
	return 0
}
