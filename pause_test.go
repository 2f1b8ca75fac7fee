package toolrun_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestPauseTurnsContinueTheThread answers 300 pause_turns in a row: each
// goes on on the run's thread with no new message, so the bytes sent per
// pause stay flat instead of carrying the whole, growing history, and the
// fake server (which holds the thread) sees the whole conversation.
func TestPauseTurnsContinueTheThread(t *testing.T) {
	const pauses = 300
	replies := make([]toolruntest.Reply, 0, pauses+1)
	for i := range pauses {
		replies = append(replies, toolruntest.Reply{
			Content:    []toolruntest.Block{toolruntest.Text(fmt.Sprintf("Searching the web, part %d of a long and winding answer...", i))},
			StopReason: "pause_turn",
		})
	}
	replies = append(replies, toolruntest.Message(toolruntest.Text("Found it.")))
	s := toolruntest.New(t, toolruntest.Script(replies...))
	res, err := toolrun.New(client(s), userParams("search"), nil, &toolrun.Options{Logger: discard(), MaxTurns: pauses + 1}).Run(bounded(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopEndTurn || res.Turns != pauses+1 {
		t.Fatalf("got %q after %d turns, want end_turn after %d", res.StopReason, res.Turns, pauses+1)
	}
	reqs := s.Requests()
	largest, total := 0, 0
	for i, req := range reqs[1:] {
		total += len(req.Body)
		largest = max(largest, len(req.Body))
		if !bytes.Contains(req.Body, []byte(`"type":"continue"`)) {
			t.Fatalf("request %d did not continue the thread: %s", i+2, req.Body)
		}
		if got := len(req.Params.Messages); got != 0 {
			t.Errorf("request %d sent %d messages, want none: the thread holds them", i+2, got)
		}
	}
	// Flat: only the previous message's id grows, by a digit or two.
	if first := len(reqs[1].Body); largest > first+8 {
		t.Errorf("the largest continue is %d bytes, the first %d: want them flat", largest, first)
	}
	t.Logf("%d requests, %d bytes in all, the largest continue %d bytes", len(reqs), total+len(reqs[0].Body), largest)
	last := reqs[len(reqs)-1].Conversation
	if len(last) != pauses+1 {
		t.Errorf("the last request stands for %d messages, want %d", len(last), pauses+1)
	}
}
