package toolruntest

import (
	"crypto/sha256"
	"fmt"
	"slices"
)

// plan is what the server works out about a valid request before it
// answers: its prompt, the edits applied to it, and its cache breakpoints.
type plan struct {
	prompt *prompt // nil for a plain request, counted as its bytes
	total  int64   // input tokens of the whole prompt
	bps    []breakpoint
	hashes [][sha256.Size]byte
	min    int64 // the minimum cacheable prompt length
	// applied is sent as context_management, for a request that has it.
	applied *wireContextManagement
	// compactEdit is the compact_20260112 edit that the request triggers.
	compactEdit *edit
}

// plan returns the plan of p, the request as the API sees it (with a
// thread's history), whose features are f.
func (s *Server) plan(p Params, f features) (*plan, error) {
	pl := &plan{min: s.opts.minCacheableTokens(p.Model)}
	in := inputFor(p)
	if f.autoTTL == 0 && !f.contextManagement && !in.special() {
		pl.total = ceilQuarter(len(in.tools) + len(in.system) + len(in.messages))
		return pl, nil
	}
	pr, err := render(in)
	if err != nil {
		return nil, err
	}
	if f.contextManagement {
		pl.applied = &wireContextManagement{AppliedEdits: []wireAppliedEdit{}}
		for _, e := range f.edits {
			var (
				a  wireAppliedEdit
				ok bool
			)
			switch e.typ {
			case "clear_tool_uses_20250919":
				in, a, pr, ok = applyClearToolUses(e, p.Messages, pr.firstMessage, in, pr)
			case "clear_thinking_20251015":
				in, a, pr, ok = applyClearThinking(e, p.Messages, pr.firstMessage, in, pr)
			case "compact_20260112":
				if pr.tokens() >= e.triggerValue {
					pl.compactEdit = &e
				}
			}
			if ok {
				pl.applied.AppliedEdits = append(pl.applied.AppliedEdits, a)
			}
		}
	}
	pl.prompt = pr
	pl.total = pr.tokens()
	if pl.bps, err = pr.breakpoints(f.autoTTL); err != nil {
		return nil, err
	}
	if len(pl.bps) > 0 {
		pl.hashes = pr.prefixHashes(p.Model)
	}
	return pl, nil
}

// answer returns the message that answers req, the n-th request, with
// reply: p as sent, full as the API sees it, with features f and plan pl.
// It reads and writes the prompt cache, adds the usage up, and stores the
// turn of a thread request, which continues prev if non-nil.
func (s *Server) answer(req *Request, n int, p, full Params, f features, pl *plan, reply Reply, prev *threadTurn) message {
	var m message
	var summary string
	switch {
	case f.compaction != nil:
		summary = summarize(full.Messages, pl.first(), f.compaction.instructions)
		m = message{id: fmt.Sprintf("msg_toolruntest_%d", n), model: p.Model, stopReason: "compaction"}
	case pl.compactEdit != nil && pl.compactEdit.pause:
		summary = summarize(full.Messages, pl.first(), pl.compactEdit.instructions)
		m = message{id: fmt.Sprintf("msg_toolruntest_%d", n), model: p.Model, stopReason: "compaction"}
	case pl.compactEdit != nil:
		summary = summarize(full.Messages, pl.first(), pl.compactEdit.instructions)
		m = resolve(reply, n, p, Usage{})
	default:
		m = resolve(reply, n, p, Usage{})
	}
	if summary != "" {
		m.content = slices.Insert(slices.Clone(m.content), 0, Compaction(summary, compactionSignature(summary)))
	}
	// after is the input of the model's turn after a compaction that the
	// compact_20260112 edit triggered: the tools, the system prompt and the
	// compaction block.
	var after int64
	if pl.compactEdit != nil {
		in := inputFor(full)
		in.messages = []byte("[" + string(replyMessage(message{content: m.content[:1]})) + "]")
		if pr, err := render(in); err == nil {
			after = pr.tokens()
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	var cu cacheUsage
	if len(pl.bps) > 0 {
		cu = s.cache.use(pl.prompt, pl.hashes, pl.bps, pl.min, now)
		if s.writes++; s.writes%1024 == 0 {
			s.cache.prune(now)
		}
	}
	in := Usage{
		InputTokens:                pl.total - cu.covered,
		CacheReadInputTokens:       cu.read,
		CacheCreationInputTokens:   cu.created,
		CacheCreation1hInputTokens: cu.created1h,
	}
	compaction := in
	compaction.OutputTokens = ceilQuarter(len(summary))
	switch {
	case summary != "" && m.stopReason == "compaction":
		// The top-level usage of a compaction is 0: what it cost is in
		// usage.iterations.
		m.usage = Usage{}
		m.iterations = []wireIteration{iterationOf("compaction", "", compaction)}
	case summary != "":
		turn := Usage{InputTokens: after, OutputTokens: outputTokens(m.content[1:])}
		if reply.Usage != nil {
			turn = *reply.Usage
		}
		m.usage = turn
		m.iterations = []wireIteration{iterationOf("compaction", "", compaction), iterationOf("message", m.model, turn)}
	case reply.Usage != nil:
		m.usage = *reply.Usage
	default:
		m.usage = in
		m.usage.OutputTokens = outputTokens(m.content)
	}
	m.contextManagement = pl.applied
	billed := m.billed()
	req.Usage = &billed
	s.usage = s.usage.add(billed)

	if prev != nil {
		prev.inFlight = false
	}
	// The API keeps a turn whose reply it sent whole, and none other.
	if f.thread != nil && reply.Fault.StreamErrorAfter <= 0 && reply.Fault.DropAfter <= 0 {
		t := &threadTurn{model: p.Model, stored: now, system: p.Raw["system"], tools: p.Raw["tools"]}
		if prev != nil {
			t.system, t.tools = prev.system, prev.tools
			t.history = slices.Clip(prev.history)
			prev.continued = true
		}
		t.history = append(t.history, storedMessages(p.Raw["messages"])...)
		t.history = append(t.history, replyMessage(m))
		s.threads[m.id] = t
	}
	return m
}

// first returns the index of the first message that the prompt counts.
func (pl *plan) first() int {
	if pl.prompt == nil {
		return 0
	}
	return pl.prompt.firstMessage
}
