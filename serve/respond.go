package serve

import (
	"net/http"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
)

// Respond. A person may answer a call in the tool's place: the call does
// not run, and the model receives the person's text as the tool's
// result, as if the tool had written it (it is not marked as an error).
// It is a fourth decision beside approve, deny and edit, taken wherever
// they are (the inbox, POST /api/interrupts/{id}/decision, a resume
// entry) as {"decision": "respond", "response": "…"}, and recorded as
// they are, with who took it and when: in the database and the run's
// State it is a [toolrun.Skip] whose result is the text, so the runner's
// decision order applies to it as to a person's other decisions (a deny
// rule still wins), and a client tool's call answered so is never handed
// to its client, as a denied one is not.
//
// It answers what only a person knows ("the account is acme-2", "ask
// finance first") without the round trip of a denial the model has to
// read as a failure, as LangChain's Agent Inbox "response" does.

// respondDecision returns the decision that answers it with text, or a
// 400 bad_decision if there is no text to answer with.
func respondDecision(it *interrupt, text string) (toolrun.Decision, error) {
	if strings.TrimSpace(text) == "" {
		return toolrun.Decision{}, refuse(http.StatusBadRequest, "bad_decision", "interrupt %q: a respond needs the text of the response", it.ID)
	}
	return policy.Skip(toolrun.Text(text)), nil
}

// responseText returns the text a respond decision d answered with.
func responseText(d toolrun.Decision) string {
	var parts []string
	for _, c := range d.Result {
		if c.OfText != nil {
			parts = append(parts, c.OfText.Text)
		}
	}
	return strings.Join(parts, "\n")
}
