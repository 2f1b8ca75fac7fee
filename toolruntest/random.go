package toolruntest

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// RandomFault returns r with, at random from rnd, one of the faults a
// model API shows in production, for fault-injection suites: the mix
// toolrun's own suites (in process and through Temporal) run, so that a
// seed means the same faults in each. Out of 100 replies, about:
//
//   - 45 have no fault;
//   - 25 are refused with 429, 529 or 500, each with a retry-after of 1 ms;
//   - 10 end in an error event after a few stream events (streamed only);
//   - 10 lose their connection midway (a streamed one after a few events,
//     another after a few hundred body bytes);
//   - 5 are slow (1 ms between events), half of them ending in an error
//     event;
//   - 2 stall midway: headers and some bytes, then nothing, until the
//     client's idle or request timeout gives up;
//   - 3 repeat a tool_use block with its id, a response no client can
//     answer validly.
//
// stream is whether the request asked for a stream. rnd's draws depend
// only on rnd, not on r, so a seeded suite stays reproducible.
func RandomFault(rnd *rand.Rand, stream bool, r Reply) Reply {
	ms := time.Millisecond
	switch x := rnd.IntN(100); {
	case x < 45:
	case x < 55:
		r.Fault = Fault{Status: http.StatusTooManyRequests, RetryAfter: ms}
	case x < 63:
		r.Fault = Fault{Status: 529, RetryAfter: ms}
	case x < 70:
		r.Fault = Fault{Status: http.StatusInternalServerError, RetryAfter: ms}
	case x < 80: // no fault for a reply that is not streamed
		r.Fault = Fault{StreamErrorAfter: 1 + rnd.IntN(24)}
	case x < 90:
		if stream {
			r.Fault = Fault{DropAfter: 1 + rnd.IntN(24)}
		} else {
			r.Fault = Fault{DropAfter: 1 + rnd.IntN(300), RetryAfter: ms}
		}
	case x < 93:
		r.Fault = Fault{EventDelay: ms}
	case x < 95:
		r.Fault = Fault{EventDelay: ms, StreamErrorAfter: 1 + rnd.IntN(24)}
	case x < 97:
		if stream {
			r.Fault = Fault{StallAfter: 1 + rnd.IntN(24)}
		} else {
			r.Fault = Fault{StallAfter: 1 + rnd.IntN(300)}
		}
	default:
		for i, b := range r.Content {
			if b.Type == "tool_use" {
				r.Content = slices.Insert(slices.Clone(r.Content), i+1, b)
				break
			}
		}
	}
	return r
}

// ResultTexts returns the text of each tool_result block in msgs, by its
// tool_use id: what the model received for each call, for a suite that
// checks every answer came from its call's one execution.
func ResultTexts(msgs []anthropic.BetaMessageParam) map[string]string {
	results := map[string]string{}
	for _, m := range msgs {
		if m.OfUser == nil {
			continue
		}
		for _, b := range m.OfUser.Content {
			if b.OfToolResult == nil {
				continue
			}
			var text strings.Builder
			for _, c := range b.OfToolResult.Content {
				if c.OfText != nil {
					text.WriteString(c.OfText.Text)
				}
			}
			results[b.OfToolResult.ToolUseID] = text.String()
		}
	}
	return results
}
