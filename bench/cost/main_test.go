package main

import (
	"testing"

	"github.com/toolrun/toolrun"
)

// TestCost runs the cost comparison. Token counts are deterministic (the
// fake server's accounting, not timings), so the target is checked here.
func TestCost(t *testing.T) {
	ctx := t.Context()
	off, err := official(ctx, "official", false)
	if err != nil {
		t.Fatal(err)
	}
	offCached, err := official(ctx, "official, caching", true)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := withToolrun(ctx, "toolrun", toolrun.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.text != off.text || tr.text != answer {
		t.Errorf("final answers %q and %q, want both %q", off.text, tr.text, answer)
	}
	if ratio := tr.billed() / off.billed(); ratio > 0.2 {
		t.Errorf("toolrun costs %.3f of the official runner's billed input (its defaults), want at most 0.2", ratio)
	}
	// Caching is the whole difference of the defaults: with it on, the
	// official runner bills what toolrun does.
	if ratio := tr.billed() / offCached.billed(); ratio < 0.95 || ratio > 1.05 {
		t.Errorf("toolrun costs %.3f of the official runner's billed input with caching on, want 1.00 ± 0.05", ratio)
	}
	compacted, err := withToolrun(ctx, "compacted", toolrun.Options{Compaction: toolrun.Compaction{Threshold: 20_000}})
	if err != nil {
		t.Fatal(err)
	}
	if compacted.text != answer || compacted.context >= tr.context {
		t.Errorf("with compaction: answer %q, context %d; want %q and less than %d", compacted.text, compacted.context, answer, tr.context)
	}
}
