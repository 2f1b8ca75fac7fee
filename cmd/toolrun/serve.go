package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	_ "modernc.org/sqlite" // the database/sql driver of --db

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/fstools"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/temporal/servetemporal"
	"github.com/toolrun/toolrun/toolruntest"
	temporalclient "go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

var serveCommand = &command{
	name:    "serve",
	args:    "[flags]",
	summary: "serve the runner to any language over HTTP, as AG-UI 1.0 (SSE)",
	doc: `Serve runs the tool-use loop for clients in any language that speak AG-UI
1.0 (@ag-ui/client's HttpAgent, say): POST a RunAgentInput to / and read the
run back as server-sent events. A threadId is a conversation the server
keeps; calls that need approval end a run with interrupts, which the next
run answers with resume entries; tools the client declares are run by the
client. See package github.com/toolrun/toolrun/serve for the protocol.

Everything lasts in the SQLite file --db: a killed server loses no
decision and runs no call twice. SIGTERM drains: no new run starts, runs in
flight get --grace to finish, then are stopped with their state saved.
With --temporal-worker, the worker here also stops polling and lets the
polls under way end (at once on a server that ends them, up to a minute
on one that does not), so no task given to it is lost.

Safety. The server listens on loopback unless --addr names another
address, which needs --tokens: a JSON file of
[{"name": "alice", "token": "…", "scopes": ["run", "approve", "read"], "max_runs": 4}].
A token's optional "tenant" puts it and its threads in a tenant: read and
approve then reach that tenant's threads only.
--cors names the browser origins allowed (none by default). --tls-cert and
--tls-key serve HTTPS (SIGHUP reloads them); without them, put a TLS proxy
in front of a server that listens beyond loopback. A body must arrive
within --body-timeout of its request's start (else 408); a client IP
address may hold --max-conns-per-client connections and the server
--max-conns (else 503); without --tokens, --local-max-runs runs may run at
once (else 429). See "Deployment" in docs/serve.md.

--config FILE reads these settings from a JSON object whose keys are the
flags' names: {"addr": "127.0.0.1:9000", "require-approval": ["pay"],
"max-turns": 10, "tool-timeout": "1m"}. A flag on the command line
overrides the file; an unknown key is an error.

Tools and approval are as for "toolrun run": --workdir, --mcp, --mcp-url,
--approve (ask makes each MCP call an interrupt), and --require-approval
TOOL for any tool of the server. An approval is an approver's (a token with
the approve scope, or the inbox) unless --user-approves TOOL (or *) makes it
the user's, which the client running the thread may give in its next run:
that is what CopilotKit's in-chat approval needs. --script FILE answers with a scripted
model: JSON Lines of replies as "toolrun run --script" takes them, where a
reply with "scene": "TEXT" starts the replies for conversations whose
latest user text is TEXT, and "delay_ms" holds a reply back.

Temporal. With --temporal ADDRESS each thread is a workflow of the
temporal module (toolrun.Run) on the Temporal server at ADDRESS, in
--temporal-namespace, run by the workers of --temporal-queue: its workflow id
is the thread id. The server still keeps threads, runs, events and
decisions in --db; the runs' states are the workflows'. Pending calls are
listed from the workflows' search attributes and memo and decided by signal,
so the JSON API and the inbox work while no worker runs; the namespace needs
the search attributes of "temporal server start-dev --search-attribute"
(see temporal/ci.sh). With --temporal-worker (the default) this process is
also a worker, with the server's tools and approval rules; without it,
start workers elsewhere with the same tools, whose activities defer client
tools (temporal.Activities.DeferClientTools).`,
	exits: []exitStatus{
		{exitOK, "ok", "the server stopped on a signal, after draining"},
		{exitError, "error", "the server could not start or failed"},
		{exitUsage, "usage", "the flags are wrong"},
	},
	setup: func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		var f serveFlags
		f.approve = approveAsk
		fs.StringVar(&f.config, "config", "", "read the settings from the JSON `file`: an object of these flags' names and values; flags given override it")
		fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen on `host:port` (port 0: any free port)")
		fs.StringVar(&f.db, "db", "", "keep threads, runs and decisions in the SQLite `file` (default $XDG_STATE_HOME/toolrun/serve.db)")
		fs.StringVar(&f.tokens, "tokens", "", "accept the bearer tokens of the JSON `file`; required for a non-loopback --addr")
		fs.StringVar(&f.cors, "cors", "", "allow the comma-separated browser `origins`")
		fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with the PEM certificate chain of `file` (with --tls-key); SIGHUP reloads both")
		fs.StringVar(&f.tlsKey, "tls-key", "", "the PEM private key `file` of --tls-cert")
		fs.IntVar(&f.maxConns, "max-conns", 4096, "keep at most `n` connections open; one more is answered 503")
		fs.IntVar(&f.maxConnsPerClient, "max-conns-per-client", 256, "keep at most `n` connections of one client IP address open; one more is answered 503")
		fs.IntVar(&f.localMaxRuns, "local-max-runs", 64, "without --tokens, run at most `n` runs at once; one more is answered 429")
		fs.Int64Var(&f.maxBody, "max-body-bytes", 8<<20, "answer 413 to a request whose body is larger than `n` bytes; of a run's, to what it brings beyond the thread's history")
		fs.Int64Var(&f.maxHistory, "max-history-bytes", 64<<20, "let a run's body carry up to `n` bytes of its thread's history, sent again, beside --max-body-bytes (-1: none)")
		fs.DurationVar(&f.bodyTimeout, "body-timeout", time.Minute, "answer 408 to a request whose body has not arrived whole `duration` after its start")
		fs.StringVar(&f.model, "model", string(anthropic.ModelClaudeSonnet5_5), "the `model` to ask")
		fs.StringVar(&f.system, "system", "", "the system `prompt`")
		fs.IntVar(&f.maxTurns, "max-turns", toolrun.DefaultMaxTurns, "stop each run after `n` model requests")
		fs.IntVar(&f.maxTokens, "max-tokens", 4096, "the most tokens of each response, `n`")
		fs.Float64Var(&f.budgetUSD, "budget-usd", 0, "stop a thread before it costs more than `dollars` (0: no bound)")
		fs.Int64Var(&f.budgetTokens, "budget-output-tokens", 0, "stop a thread before it writes more than `n` output tokens (0: no bound)")
		fs.IntVar(&f.budgetCalls, "budget-tool-calls", 0, "stop a thread before it makes more than `n` tool calls (0: no bound)")
		f.tools.define(fs)
		fs.Var(&f.approve, "approve", "how MCP calls are decided: `ask` (an interrupt for the client or the inbox), auto or deny")
		fs.Var(&f.requireApproval, "require-approval", "make each call of `tool` an interrupt (repeatable)")
		fs.Var(&f.userApproves, "user-approves", "let the client running a thread answer the approvals of `tool`'s calls, as CopilotKit's in-chat approval does (repeatable; * for every tool); by default only an approve-scoped token or the inbox may")
		fs.DurationVar(&f.toolTimeout, "tool-timeout", 5*time.Minute, "cancel a tool call that runs longer than `duration` (0: no limit)")
		fs.DurationVar(&f.grace, "grace", 30*time.Second, "on SIGTERM, let runs in flight finish for `duration`")
		fs.DurationVar(&f.approvalTTL, "approval-ttl", 24*time.Hour, "let an interrupt be answered for `duration`")
		fs.StringVar(&f.notify, "notify", "", "POST a signed JSON notice to `url` when a call starts waiting for a person (secret: $TOOLRUN_NOTIFY_SECRET)")
		fs.StringVar(&f.publicURL, "public-url", "", "the server's `url` as people reach it, for --notify's links (default: from --addr)")
		fs.StringVar(&f.record, "record", "", "record each run as a JSON Lines transcript in `dir`, for toolrun view and replay")
		fs.StringVar(&f.temporal, "temporal", "", "run each thread as a workflow on the Temporal server at `host:port`")
		fs.StringVar(&f.temporalNamespace, "temporal-namespace", "default", "the Temporal `namespace` of --temporal")
		fs.StringVar(&f.temporalQueue, "temporal-queue", "toolrun", "the task `queue` of the workers of --temporal")
		fs.BoolVar(&f.temporalWorker, "temporal-worker", true, "with --temporal, also run a worker of --temporal-queue in this process, with the server's tools")
		fs.StringVar(&f.script, "script", "", "answer with the scripted model of `replies.jsonl` on a local fake server: offline, no API key")
		return func(ctx context.Context, c *cli, args []string) int {
			if len(args) > 0 {
				return c.usageError("serve", "serve takes no arguments, got %q", args[0])
			}
			if f.config != "" {
				if err := applyConfig(fs, f.config); err != nil {
					return c.usageError("serve", "--config %v", err)
				}
			}
			return c.serve(ctx, f)
		}
	},
}

type serveFlags struct {
	config                 string
	addr, db, tokens, cors string
	tlsCert, tlsKey        string
	maxConns               int
	maxConnsPerClient      int
	localMaxRuns           int
	bodyTimeout            time.Duration
	maxBody                int64
	maxHistory             int64
	model, system          string
	maxTurns, maxTokens    int
	budgetUSD              float64
	budgetTokens           int64
	budgetCalls            int
	tools                  toolFlags
	approve                approveMode
	requireApproval        listFlag
	userApproves           listFlag
	toolTimeout, grace     time.Duration
	approvalTTL            time.Duration
	script, record         string
	// notify is the webhook's URL, publicURL the base of its links.
	notify, publicURL string
	// temporal is the Temporal server's address, "" to run in process.
	temporal, temporalNamespace, temporalQueue string
	temporalWorker                             bool
}

// serve runs the server until ctx ends, then drains it.
func (c *cli) serve(ctx context.Context, f serveFlags) int {
	var tokens []serve.Token
	if f.tokens != "" {
		b, err := os.ReadFile(f.tokens)
		if err != nil {
			c.errorf("serve", "--tokens: %v", err)
			return exitError
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&tokens); err != nil || len(tokens) == 0 {
			return c.usageError("serve", "--tokens %s: want a JSON array of {name, token, scopes, max_runs, tenant} (%v)", f.tokens, err)
		}
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return c.usageError("serve", "--addr: %v", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) && len(tokens) == 0 {
		return c.usageError("serve", "--addr %s is not a loopback address: give --tokens, or anyone who reaches it could run tools", f.addr)
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return c.usageError("serve", "--tls-cert and --tls-key go together")
	}
	var certs *certFiles
	if f.tlsCert != "" {
		if certs, err = loadCert(f.tlsCert, f.tlsKey); err != nil {
			c.errorf("serve", "%v", err)
			return exitError
		}
	}
	specs, err := parseMCPSpecs(f.tools.MCP, f.tools.MCPURL)
	if err != nil {
		return c.usageError("serve", "%v", err)
	}
	log := c.logger(c.stderr, false)

	var client anthropic.Client
	if f.script != "" {
		sc, err := readScenes(f.script)
		if err != nil {
			return c.usageError("serve", "--script: %v", err)
		}
		srv := toolruntest.New(nil, toolruntest.Options{Func: sc.reply})
		defer srv.Close()
		client = srv.Client()
	} else {
		client = c.client()
	}

	var tools []toolrun.Tool
	if w := f.tools.Workdir; w != "" {
		root, err := fstools.Open(w, nil)
		if err != nil {
			c.errorf("serve", "--workdir: %v", err)
			return exitError
		}
		defer root.Close()
		tools = append(tools, root.Tools()...)
	}
	servers, serverTools, err := connectMCP(ctx, specs, f.tools.mcpFlags, f.approve.mcpConfig, log)
	if err != nil {
		c.errorf("serve", "MCP server %v", err)
		return exitError
	}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	for _, list := range serverTools {
		tools = append(tools, list...)
	}

	dbPath, err := serveDBPath(f.db, c.getenv)
	if err != nil {
		c.errorf("serve", "--db: %v", err)
		return exitError
	}
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		c.errorf("serve", "--db: %v", err)
		return exitError
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one writer: SQLite's rule, kept by the pool

	opts := toolrun.Options{
		Logger:   log,
		MaxTurns: f.maxTurns,
		Timeouts: toolrun.Timeouts{Tool: f.toolTimeout},
		Budget:   toolrun.Budget{CostUSD: f.budgetUSD, OutputTokens: f.budgetTokens, ToolCalls: f.budgetCalls},
	}
	if len(f.requireApproval) > 0 {
		names := map[string]bool{}
		for _, n := range f.requireApproval {
			names[n] = true
		}
		opts.Policy = func(_ context.Context, call toolrun.PolicyCall) toolrun.Decision {
			if names[call.Name] {
				return policy.Defer("--require-approval " + call.Name)
			}
			return toolrun.Decision{}
		}
	}
	params := anthropic.BetaMessageNewParams{Model: anthropic.Model(f.model), MaxTokens: int64(f.maxTokens)}
	if f.system != "" {
		params.System = []anthropic.BetaTextBlockParam{{Text: f.system}}
	}
	var origins []string
	for _, o := range strings.Split(f.cors, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	var executor serve.Executor
	where := "in process"
	var stopWorker func() // the worker this process runs, if any
	if f.temporal != "" {
		dialCtx, cancelDial := context.WithTimeout(ctx, 15*time.Second)
		tc, err := temporalclient.DialContext(dialCtx, temporalclient.Options{
			HostPort: f.temporal, Namespace: f.temporalNamespace,
			Logger: temporallog.NewStructuredLogger(log),
		})
		cancelDial()
		if err != nil {
			c.errorf("serve", "--temporal %s: %v", f.temporal, err)
			return exitError
		}
		defer tc.Close()
		executor = servetemporal.New(servetemporal.Config{Client: tc, TaskQueue: f.temporalQueue})
		where = fmt.Sprintf("on Temporal at %s, namespace %s, task queue %s", f.temporal, f.temporalNamespace, f.temporalQueue)
		if f.temporalWorker {
			// The worker's stop timeout is the grace period: a tool call
			// still running after it is cancelled, and answered
			// "interrupted", as in process.
			w := temporal.NewWorker(tc, f.temporalQueue, temporal.NewActivities(client, tools, &opts).DeferClientTools(), worker.Options{WorkerStopTimeout: f.grace})
			if err := w.Start(); err != nil {
				c.errorf("serve", "--temporal-worker: %v", err)
				return exitError
			}
			stopWorker = w.Stop
			where += ", with a worker here"
		}
	}
	h, err := serve.New(ctx, serve.Config{
		Client: client, Params: params, Tools: tools, Options: opts, DB: db,
		Tokens: tokens, AllowedOrigins: origins, ApprovalTTL: f.approvalTTL, UserApproves: f.userApproves, Logger: log, RecordDir: f.record,
		Executor: executor, MaxConns: f.maxConns, MaxConnsPerClient: f.maxConnsPerClient,
		LocalMaxRuns: f.localMaxRuns, BodyReadTimeout: f.bodyTimeout, MaxBodyBytes: f.maxBody,
		MaxHistoryBytes: f.maxHistory,
		Notify:          notifyConfig(f),
	})
	if err != nil {
		c.errorf("serve", "%v", err)
		return exitError
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		c.errorf("serve", "%v", err)
		return exitError
	}
	srv := httpServer(h)
	scheme := "http"
	var tlsConfig *tls.Config
	if certs != nil {
		scheme, tlsConfig = "https", certs.config()
		certs.reloadOnHUP(ctx, log)
	}
	fmt.Fprintf(c.stdout, "toolrun serve: listening on %s://%s (state in %s, runs %s)\n", scheme, ln.Addr(), dbPath, where)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(h.Listener(ln, tlsConfig)) }()
	select {
	case err := <-errc:
		c.errorf("serve", "%v", err)
		return exitError
	case <-ctx.Done():
	}
	workerStopped := make(chan struct{})
	if stopWorker != nil {
		// The worker drains beside the server's runs: it stops polling,
		// lets the polls under way end (temporal.NewWorker's drain: up to
		// the Temporal server's long-poll timeout, about a minute, on a
		// server that does not end them itself), so that no task handed to
		// it is lost, and gives the activities it runs the grace period.
		fmt.Fprintf(c.stdout, "toolrun serve: draining (up to %s; the worker here also lets its polls end, up to a minute more on a server that does not end them)\n", f.grace)
		go func() { defer close(workerStopped); stopWorker() }()
	} else {
		fmt.Fprintf(c.stdout, "toolrun serve: draining (up to %s)\n", f.grace)
		close(workerStopped)
	}
	grace, cancel := context.WithTimeout(context.Background(), f.grace)
	defer cancel()
	if err := h.Shutdown(grace); err != nil {
		fmt.Fprintf(c.stdout, "toolrun serve: runs still in flight after %s were stopped, their state saved\n", f.grace)
	}
	// The streams end with their runs; what is left are idle connections.
	closing, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	srv.Shutdown(closing)
	<-workerStopped
	fmt.Fprintln(c.stdout, "toolrun serve: stopped")
	return exitOK
}

// serveDBPath returns the database file: name, or the default, whose
// directory it creates.
func serveDBPath(name string, getenv func(string) string) (string, error) {
	if name != "" {
		return name, nil
	}
	dir := getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".local", "state")
	}
	dir = filepath.Join(dir, "toolrun")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return filepath.Join(dir, "serve.db"), nil
}

// sceneScript is a scripted model for a server: replies by scene. The
// reply to a request is the k-th of the scene named by the conversation's
// latest user text, k the assistant messages since it, so that each
// thread plays its scene from its start, the same after a restart.
type sceneScript struct {
	scenes map[string][]toolruntest.Reply
}

// readScenes reads a script; see the serve command's doc.
func readScenes(name string) (*sceneScript, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	s := &sceneScript{scenes: map[string][]toolruntest.Reply{}}
	scene := ""
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), maxScriptLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var extra struct {
			Scene   *string `json:"scene"`
			DelayMS int     `json:"delay_ms"`
		}
		if err := json.Unmarshal(line, &extra); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		reply, err := scriptReply(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if extra.Scene != nil {
			scene = *extra.Scene
			if _, dup := s.scenes[scene]; dup {
				return nil, fmt.Errorf("line %d: scene %q is given twice", n, scene)
			}
		}
		if extra.DelayMS > 0 {
			reply.Fault.EventDelay = time.Duration(extra.DelayMS) * time.Millisecond
		}
		s.scenes[scene] = append(s.scenes[scene], reply)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(s.scenes) == 0 {
		return nil, errors.New("no replies")
	}
	return s, nil
}

// reply answers a request of the fake server.
func (s *sceneScript) reply(r *toolruntest.Request) toolruntest.Reply {
	scene, k := "", 0
	for _, m := range r.Conversation {
		if m.Role == "assistant" {
			k++
			continue
		}
		for _, b := range m.Content {
			if b.Type == "text" {
				scene, k = b.Text, 0
			}
		}
	}
	replies, ok := s.scenes[scene]
	if !ok {
		replies = s.scenes[""]
	}
	if k >= len(replies) {
		return toolruntest.Message(toolruntest.Text(fmt.Sprintf("(the script has no reply %d for %q)", k+1, scene)))
	}
	return replies[k]
}

// httpServer is the server toolrun serve listens with: headers must arrive
// within 10 s and weigh at most 64 KiB (a request's token and a
// Last-Event-ID need far less), and a keep-alive connection idle for 2
// minutes is closed, so idle clients do not hold connections for ever.
// Bodies and event streams have their own bounds in serve.Config.
func httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
}

// notifyConfig is the webhook of --notify, signed with
// $TOOLRUN_NOTIFY_SECRET (an environment variable, so that the secret is
// in neither the process list nor a --config file), whose links start
// with --public-url or, by default, the address the server listens on.
func notifyConfig(f serveFlags) serve.Notify {
	if f.notify == "" {
		return serve.Notify{}
	}
	base := f.publicURL
	if base == "" {
		scheme := "http"
		if f.tlsCert != "" {
			scheme = "https"
		}
		base = scheme + "://" + f.addr
	}
	return serve.Notify{URL: f.notify, Secret: os.Getenv("TOOLRUN_NOTIFY_SECRET"), PublicURL: base}
}
