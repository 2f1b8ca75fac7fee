package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// measured matches a figure with a unit, as the report writes them:
// 1303.2 µs, 15.7 KiB, 0.20×, ×3.2.
var measured = regexp.MustCompile(`×\d[\d.,]*|\d[\d.,]*\s?(µs|ms|KiB|MiB|GiB|×)`)

// TestProseNumbersInTables: every figure BENCHMARKS.md quotes outside its
// generated blocks (the root bench's, bench/cost's and the Temporal
// module's; and outside fenced command output) appears in them, so
// the prose cannot go stale while the tables move on.
func TestProseNumbersInTables(t *testing.T) {
	b, err := os.ReadFile("../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	var prose, generated strings.Builder
	inGen, inFence := false, false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "<!-- bench: begin"), strings.HasPrefix(line, "<!-- cost:begin"), strings.HasPrefix(line, "<!-- temporal-bench:begin"):
			inGen = true
		case strings.HasPrefix(line, "<!-- bench: end"), strings.HasPrefix(line, "<!-- cost:end"), strings.HasPrefix(line, "<!-- temporal-bench:end"):
			inGen = false
		case strings.HasPrefix(line, "```"):
			inFence = !inFence
		case inGen:
			generated.WriteString(line + "\n")
		case !inFence:
			prose.WriteString(line + "\n")
		}
	}
	gen := strings.ReplaceAll(generated.String(), " ", "")
	for _, n := range measured.FindAllString(prose.String(), -1) {
		if !strings.Contains(gen, strings.ReplaceAll(n, " ", "")) {
			t.Errorf("BENCHMARKS.md quotes %q outside the generated tables, which do not hold it", n)
		}
	}
}
