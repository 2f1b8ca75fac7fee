package toolruntest

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"time"
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
