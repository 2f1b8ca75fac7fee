package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

var demoCommand = &command{
	name:    "demo",
	args:    "[flags]",
	summary: "run a multi-turn tool-use conversation with local tools",
	doc: `Demo runs a tool-use conversation end to end with four local tools:
fetch_rates (which fails the first time it is called), lookup_city,
convert_currency and send_report, which needs approval. It prints each turn,
tool call, result and decision as it happens, then how the run stopped and
the tokens it used. Tool failures are also logged to stderr.

Without ANTHROPIC_API_KEY the model is a scripted one on a local fake
server, so the demo needs no key and no network; the script also sends one
call with invalid input. With ANTHROPIC_API_KEY set, the same tools and
prompt run against the Anthropic API.

When send_report asks for approval, demo asks at the terminal: approve,
deny with a reason sent to the model, or approve it for the rest of the
run. With --approve auto (or --yes) it approves without asking, with
--approve deny it denies; with no terminal to ask at, it denies the call
and says so, so that the demo always runs to its end.

The run is recorded as a JSON Lines transcript, for "toolrun replay" and
"toolrun view": by default to a new file named
toolrun-demo-<time>-<id>.jsonl in the temporary directory ($TMPDIR), so
that two demos never share one; elsewhere with --record file (which must
not exist), not at all with --record off.`,
	setup: func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		f := demoFlags{approve: approveAsk}
		fs.Var(&f.approve, "approve", "who decides the calls that need approval: `ask` at the terminal, auto (approve) or deny")
		fs.BoolVar(&f.yes, "yes", false, "approve every tool call that needs approval, without asking: --approve auto")
		fs.StringVar(&f.model, "model", string(anthropic.ModelClaudeSonnet5_5), "the `model` to ask when ANTHROPIC_API_KEY is set")
		fs.IntVar(&f.maxTurns, "max-turns", 10, "stop after `n` model requests")
		fs.StringVar(&f.record, "record", "auto", "record the run to `file` (a new file; - for stdout), a JSON Lines transcript for replay and view (auto: a new toolrun-demo-<time>-<id>.jsonl in the temporary directory; off: none)")
		return func(ctx context.Context, c *cli, args []string) int {
			if len(args) > 0 {
				return c.usageError("demo", "unexpected arguments: %s", strings.Join(args, " "))
			}
			if f.maxTurns < 1 {
				return c.usageError("demo", "--max-turns must be at least 1")
			}
			if f.yes {
				if f.approve == approveDeny {
					return c.usageError("demo", "--yes and --approve deny contradict each other")
				}
				f.approve = approveAuto
			}
			return c.demo(ctx, f)
		}
	},
}

type demoFlags struct {
	approve  approveMode
	yes      bool
	model    string
	maxTurns int
	record   string
}

// demoPrompt is the user's message that starts the demo.
const demoPrompt = "How much is 25,000 Japanese yen in the currency of Lisbon? E-mail a short report to me@example.com."

func (c *cli) demo(ctx context.Context, f demoFlags) int {
	if f.record == "-" {
		// The transcript goes to stdout; the display moves to stderr.
		cc := *c
		cc.stdout, cc.stdoutTerminal, cc.out = c.stderr, isTerminal(c.stderr), c.stdout
		c = &cc
	}
	var client anthropic.Client
	if key := c.getenv("ANTHROPIC_API_KEY"); key != "" {
		opts := []option.RequestOption{option.WithAPIKey(key)}
		if u := c.getenv("ANTHROPIC_BASE_URL"); u != "" {
			opts = append(opts, option.WithBaseURL(u))
		}
		client = anthropic.NewClient(opts...)
		fmt.Fprintf(c.stdout, "toolrun demo: the Anthropic API, model %s\n", f.model)
	} else {
		s := toolruntest.New(nil, toolruntest.Script(demoReplies()...))
		defer s.Close()
		client = s.Client()
		fmt.Fprintln(c.stdout, "toolrun demo: offline, with a scripted model on a local fake server (set ANTHROPIC_API_KEY to use the API)")
	}

	tools := newDemoTools().list()
	var names []string
	for _, t := range tools {
		name := t.Name()
		if t.Config().Policy != nil {
			name += " (needs approval)"
		}
		names = append(names, name)
	}
	fmt.Fprintf(c.stdout, "tools: %s\n", strings.Join(names, ", "))
	fmt.Fprintln(c.stdout, "log: warnings and tool failures go to stderr")
	d := c.newDisplay("logged to stderr")
	shown := d.live
	if shown {
		d.logNote = ""
	}
	opts := &toolrun.Options{
		Logger:   c.logger(d.writer(c.stderr), shown),
		MaxTurns: f.maxTurns,
		OnEvent:  d.event,
	}
	var tf *transcriptFile
	switch f.record {
	case "auto", "":
		f.record = ""
		fallthrough
	default:
		var err error
		tf, err = c.createTranscript(f.record, "toolrun-demo", map[string]string{"name": "toolrun demo", metaTools: "{}"})
		if err != nil {
			c.errorf("demo", "--record: %v", err)
			return exitError
		}
		defer tf.close(c, "demo")
		opts.OnEvent = func(ctx context.Context, e toolrun.Event) {
			tf.rec.Observe(ctx, e)
			d.event(ctx, e)
		}
		f.record = tf.name
		if tf.name != "-" {
			fmt.Fprintf(c.stdout, "record: %s\n", f.record)
		}
	case "off":
		f.record = ""
	}
	fmt.Fprintf(c.stdout, "\nuser: %s\n", demoPrompt)
	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.Model(f.model),
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(demoPrompt))},
	}
	var list []toolrun.Tool
	for _, t := range tools {
		list = append(list, t)
	}
	r := toolrun.New(client, params, list, opts)

	d.start()
	autoFlag := "--approve auto"
	if f.yes {
		autoFlag = "--yes"
	}
	res, err := runWithApproval(ctx, r, c.newApprover(f.approve, autoFlag, noTerminalReason, d.writer(c.stdout), d.writer(c.stderr)))
	d.close()
	d.summary(res)
	if f.record != "" && f.record != "-" {
		q := shellQuote(f.record)
		self := selfCommand()
		fmt.Fprintf(c.stdout, "transcript: %s\nsee it with: %s view %s -o report.html (or replay it: %s replay %s)\n", f.record, self, q, self, q)
	}
	switch {
	case ctx.Err() != nil:
		c.errorf("demo", "interrupted")
		return exitInterrupted
	case err != nil:
		c.errorf("demo", "%v", err)
	case res.StopReason == toolrun.StopError && res.Err != nil:
		c.errorf("demo", "%v", res.Err)
	}
	return exitCode(res.StopReason)
}

// demoScript is the model's side of the offline demo, a script as
// "toolrun run --script" reads: it calls two tools at once, retries the
// one that failed alongside a call with invalid input, corrects the input,
// sends the report (which needs approval) and answers. The script is
// fixed, so its last answer reads right whether the report was approved or
// not.
//
//go:embed demo.jsonl
var demoScript string

// demoReplies returns the replies of demoScript.
func demoReplies() []toolruntest.Reply {
	lines, err := parseScript(strings.NewReader(demoScript))
	if err != nil {
		panic("toolrun: the demo's script: " + err.Error())
	}
	replies, err := scriptReplies(lines)
	if err != nil {
		panic("toolrun: the demo's script: " + err.Error())
	}
	return replies
}

// demoRates are the demo's exchange rates: units of each currency per euro.
var demoRates = map[string]float64{
	"CHF": 0.94,
	"EUR": 1,
	"GBP": 0.85,
	"JPY": 162.6,
	"USD": 1.08,
}

type demoCity struct {
	City     string `json:"city"`
	Country  string `json:"country"`
	Currency string `json:"currency"`
}

var demoCities = map[string]demoCity{
	"lisbon":   {"Lisbon", "Portugal", "EUR"},
	"london":   {"London", "United Kingdom", "GBP"},
	"new york": {"New York", "United States", "USD"},
	"tokyo":    {"Tokyo", "Japan", "JPY"},
	"zurich":   {"Zurich", "Switzerland", "CHF"},
}

type (
	ratesIn struct {
		Base string `json:"base" jsonschema:"the currency to quote the rates against, such as EUR"`
	}
	cityIn struct {
		Name string `json:"name" jsonschema:"the city's name, such as Lisbon"`
	}
	convertIn struct {
		Amount float64 `json:"amount" jsonschema:"the amount to convert, a number"`
		From   string  `json:"from" jsonschema:"the currency of the amount, such as JPY"`
		To     string  `json:"to" jsonschema:"the currency to convert to, such as EUR"`
	}
	reportIn struct {
		To      string `json:"to" jsonschema:"the recipient's e-mail address"`
		Subject string `json:"subject"`
		Body    string `json:"body"`
	}
	ratesOut struct {
		Base  string             `json:"base"`
		Rates map[string]float64 `json:"rates"`
	}
)

// demoTools are the demo's tools, with the state they keep between calls.
type demoTools struct {
	rateCalls atomic.Int32 // calls of fetch_rates, which fails the first
}

func newDemoTools() *demoTools { return &demoTools{} }

// list returns the tools, sorted by name.
func (d *demoTools) list() []*toolrun.FuncTool {
	report := toolrun.NewTool("send_report", "E-mails a short report. In this demo, no e-mail leaves the machine.", d.sendReport)
	report.Policy = policy.RequireApproval("sends e-mail")
	return []*toolrun.FuncTool{
		toolrun.NewTool("convert_currency", "Converts an amount between currencies at today's rate.", d.convert),
		toolrun.NewTool("fetch_rates", "Fetches today's exchange rates against a base currency.", d.fetchRates),
		toolrun.NewTool("lookup_city", "Looks up a city's country and currency.", d.lookupCity),
		report,
	}
}

func (d *demoTools) fetchRates(ctx context.Context, in ratesIn) (ratesOut, error) {
	if d.rateCalls.Add(1) == 1 {
		return ratesOut{}, errors.New("upstream timeout")
	}
	base, ok := demoRates[strings.ToUpper(in.Base)]
	if !ok {
		return ratesOut{}, unknownCurrency(in.Base)
	}
	out := ratesOut{Base: strings.ToUpper(in.Base), Rates: map[string]float64{}}
	for code, rate := range demoRates {
		if code != out.Base {
			out.Rates[code] = math.Round(rate/base*1e4) / 1e4
		}
	}
	return out, nil
}

func (d *demoTools) lookupCity(ctx context.Context, in cityIn) (demoCity, error) {
	c, ok := demoCities[strings.ToLower(strings.TrimSpace(in.Name))]
	if !ok {
		return demoCity{}, fmt.Errorf("no city named %q in the demo's list", in.Name)
	}
	return c, nil
}

func (d *demoTools) convert(ctx context.Context, in convertIn) (string, error) {
	from, ok := demoRates[strings.ToUpper(in.From)]
	if !ok {
		return "", unknownCurrency(in.From)
	}
	to, ok := demoRates[strings.ToUpper(in.To)]
	if !ok {
		return "", unknownCurrency(in.To)
	}
	if in.Amount < 0 {
		return "", fmt.Errorf("amount %v is negative", in.Amount)
	}
	return fmt.Sprintf("%.2f %s = %.2f %s", in.Amount, strings.ToUpper(in.From), in.Amount/from*to, strings.ToUpper(in.To)), nil
}

func (d *demoTools) sendReport(ctx context.Context, in reportIn) (string, error) {
	if !strings.Contains(in.To, "@") {
		return "", fmt.Errorf("%q is not an e-mail address", in.To)
	}
	return fmt.Sprintf("report %q accepted for %s (demo: nothing was sent)", in.Subject, in.To), nil
}

func unknownCurrency(code string) error {
	known := make([]string, 0, len(demoRates))
	for c := range demoRates {
		known = append(known, c)
	}
	slices.Sort(known)
	return fmt.Errorf("unknown currency %q; known: %s", code, strings.Join(known, ", "))
}
