// Package defaults holds the numbers a run uses when its Options leave a
// bound at zero, so that the root package, the temporal module and the CLI
// agree on them without making them part of the public surface: each
// Options field's doc says its default.
package defaults

// MaxTurns is the turn limit when Options.MaxTurns is zero.
const MaxTurns = 25

// MaxParallelTools bounds the calls of one turn that run at once when
// Options.MaxParallelTools is zero.
const MaxParallelTools = 128
