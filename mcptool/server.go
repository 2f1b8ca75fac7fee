package mcptool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/redact"
)

// Dial returns a new transport to an MCP server. A [Server] calls it once to
// connect and again for each restart, so it must return a fresh transport
// each time: an MCP transport connects only once. [Command],
// [StreamableHTTP] and [InMemory] make the common ones.
//
// A Dial that returns an *mcp.CommandTransport may leave its command's
// Stderr nil: the Server then keeps the end of the command's standard error
// and logs it, redacted, when the command exits. If the command's WaitDelay
// is zero, the Server sets it to 2s, so that a child process that holds the
// standard error open cannot keep a restart waiting. The Server starts the
// command itself, in a process group of its own on Unix (Setpgid, unless
// its SysProcAttr asks for Setsid, which makes a group too), and stops the
// group as a whole, so that what a launcher such as npx, uvx or sh -c
// starts stops with it; the transport's TerminateDuration, or 500ms if it
// is zero, is the grace period of [Server.Close]. The Server sets the
// command's environment as [Options.PassEnv] describes.
type Dial func(ctx context.Context) (mcp.Transport, error)

const (
	// waitDelay is the WaitDelay the Server gives commands; see [Dial].
	waitDelay = 2 * time.Second
	// closeGrace is the grace period of a command whose transport sets
	// no TerminateDuration: how long Close waits for a command and its
	// process group to exit after closing its standard input, and again
	// after SIGTERM; see [Server.Close].
	closeGrace = 500 * time.Millisecond
	// restartTimeout bounds a restart, the server's initialization
	// included, when [Options.CallTimeout] is zero; see [RestartPolicy]. A
	// restart is bounded whatever the options say: a server that never
	// answers its initialize request would otherwise hold the call that
	// restarts it, and every call of the server waiting behind that one,
	// for as long as their contexts allow, which by default is for ever. A
	// minute leaves room for a slow start (a JVM, a package runner) after
	// the first, which Connect's ctx bounds.
	restartTimeout = time.Minute
)

// Command returns a Dial that runs the program name with args and talks to
// it over its standard input and output. Each connection runs a new
// process. It does not inherit the environment of this one: it gets the
// variables of [DefaultEnv] and those that [Options.PassEnv] and
// [Options.Env] add, and never an Anthropic credential or any other
// variable whose name says it holds a secret unless they name it. To set
// its directory, write a Dial that returns an
// &mcp.CommandTransport{Command: cmd} with the *exec.Cmd you need.
func Command(name string, args ...string) Dial {
	return func(context.Context) (mcp.Transport, error) {
		return &mcp.CommandTransport{Command: exec.Command(name, args...)}, nil
	}
}

// StreamableHTTP returns a Dial that connects to the MCP server at endpoint
// over the streamable HTTP transport, with http.DefaultClient. For another
// client (authentication, proxies), write a Dial that returns an
// &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: c}.
func StreamableHTTP(endpoint string) Dial {
	return func(context.Context) (mcp.Transport, error) {
		return &mcp.StreamableClientTransport{Endpoint: endpoint}, nil
	}
}

// InMemory returns a Dial that connects to server, an MCP server in this
// process, over an in-memory transport: for servers written in Go with the
// MCP SDK, and for tests. Each connection is a new session of server.
func InMemory(server *mcp.Server) Dial {
	return func(ctx context.Context) (mcp.Transport, error) {
		client, srv := mcp.NewInMemoryTransports()
		if _, err := server.Connect(ctx, srv, nil); err != nil {
			return nil, err
		}
		return client, nil
	}
}

// RestartPolicy says whether a server whose connection ended is started
// again. The zero value never restarts: once the server has exited or hung,
// every call of its tools fails with [ErrServerDown].
//
// A restart is a new connection made with the server's [Dial]: a new process
// for a command. It is made by the next call after the failure, never by the
// failed call, which is not run again since it may not be idempotent.
//
// A restart, the server's initialization included, must be done within
// [Options.CallTimeout], or within a minute if that is zero; one that is not
// fails as a restart that cannot connect does: it counts toward
// MaxRestarts, and a command's process is stopped, not left behind. The
// calls that waited for a restart that failed fail with its error at once,
// rather than each try another: only a call made after the failure
// restarts the server again.
type RestartPolicy struct {
	// MaxRestarts bounds the restarts in a row: a restart that fails to
	// connect counts, and a call that succeeds starts the count again from
	// zero. Zero means no restarts.
	MaxRestarts int

	// Backoff is the least time from a failure to the restart after it.
	// It doubles with each restart in a row, up to 32 times Backoff. A call
	// that needs the restart waits for it, as long as its ctx allows. Zero
	// means restart at once.
	Backoff time.Duration
}

// Options configures a [Server]. The zero value is ready to use: it logs to
// slog.Default(), prefixes tool names as [ToolName] does, gives every tool
// the zero [toolrun.ToolConfig], sets no call timeout of its own and never
// restarts a server. Connect copies Options.
type Options struct {
	// Logger receives the package's records, and the MCP client's: a server
	// that exited or hung at Error, with the end of its standard error for a
	// command; restarts at Info; the progress a server reports of a call at
	// Debug. The runner logs each failed call itself. Every record is
	// redacted first, as a runner's are (see [toolrun.Options].Logger).
	// Nil means slog.Default().
	Logger *slog.Logger

	// Rename, if non-nil, returns the name the model sees for the server's
	// tool named tool; it must match ^[a-zA-Z0-9_-]{1,128}$ and differ from
	// the names of every other tool of the run. Nil means
	// ToolName(server, tool), which keeps the tools of two servers apart.
	Rename func(tool string) string

	// Config is the runner configuration of each of the server's tools:
	// timeout, approval policy, exclusivity, idempotence. The runner applies
	// it exactly as it does a Go tool's.
	Config toolrun.ToolConfig

	// ConfigFor, if non-nil, returns the configuration of each tool, given
	// its MCP definition (its name is the server's), instead of Config. Its
	// annotations (read-only, destructive, idempotent hints) are the
	// server's claims: trust them only as far as you trust the server.
	ConfigFor func(tool *mcp.Tool) toolrun.ToolConfig

	// CallTimeout, if positive, bounds each tools/call. A call that passes
	// it is cancelled and fails with [ErrNoAnswer]; the server is then
	// pinged, and if it does not answer the ping within CallTimeout either
	// it is deemed hung: it is stopped (a command is killed) and the
	// Restart policy applies, as for a crash. A call cancelled through its
	// ctx, by the runner's own timeout say, is cancelled at the server but
	// does not lead to the ping. A call that restarts the server waits at
	// most CallTimeout for the restart too (see [RestartPolicy]), besides
	// its backoff. Zero means no timeout of its own for a call, and a
	// minute for a restart.
	CallTimeout time.Duration

	// Restart says whether the server is started again after it exits or
	// hangs. The zero value never restarts it.
	Restart RestartPolicy

	// PassEnv names the environment variables of this process that a
	// command's child gets besides [DefaultEnv], such as "GITHUB_TOKEN" for
	// a GitHub server. A command whose Dial leaves its Env nil gets
	// DefaultEnv and these. One whose Dial sets its Env gets that Env, and
	// these. Either way the child never gets an ANTHROPIC_* variable, nor
	// one whose name says it holds a secret (SECRET, PASSWORD, TOKEN,
	// APIKEY, CREDENTIAL, AUTH, COOKIE, SESSION, PRIVATE or PAT as a
	// '_'-separated word of it, or KEY as its last), unless
	// PassEnv names it or Env sets it. Names are compared without regard to
	// case. Nil passes none.
	PassEnv []string

	// Env holds "NAME=value" variables set in a command's child, after and
	// over those above. They are passed as they are, secrets included.
	Env []string

	// MaxTools bounds the tools [Server.Tools] takes from the server's
	// list: a server is other people's code, and every tool it lists goes
	// into every request of a run. The tools past the limit are left out,
	// with one log record at Error, and their pages are not read. Zero
	// means [DefaultMaxTools]; a negative value means no limit.
	MaxTools int

	// MaxSchemaBytes bounds the input schemas of the tools that
	// [Server.Tools] takes, the bytes of their JSON added up. A tool whose
	// schema does not fit in what is left is left out, with one log record
	// at Error for all such tools of a listing. Zero means
	// [DefaultMaxSchemaBytes]; a negative value means no limit.
	MaxSchemaBytes int
}

// The default limits of a server's listing; see [Options.MaxTools] and
// [Options.MaxSchemaBytes]. Both are far above what a real server lists
// (server-everything lists a dozen tools in 10 KB of schemas), and far
// below what would make a run slow or its requests too large.
const (
	DefaultMaxTools       = 500
	DefaultMaxSchemaBytes = 4 << 20
)

// limit returns n, or def if n is zero, or no limit (-1) if n is negative.
func limit(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return -1
	}
	return n
}

// Server is a connection to one MCP server, restarted as its
// [RestartPolicy] allows. Its tools, from [Server.Tools], call it. A Server
// is safe for concurrent use: the calls of one turn run in parallel.
type Server struct {
	name   string
	dial   Dial
	opts   Options
	log    *slog.Logger
	client *mcp.Client

	// connecting holds a token while a goroutine connects, so that one
	// restart serves every call waiting for it.
	connecting chan struct{}
	wg         sync.WaitGroup // counts the goroutines that watch connections
	calls      atomic.Int64   // numbers the calls, for their progress tokens
	// listed reports that Tools has listed the tools of the live
	// connection since it last logged a change of the list at Info.
	listed atomic.Bool

	mu       sync.Mutex // guards conn, closed, failures, failedRestarts, last, lastAt
	conn     *conn      // the live connection, or nil
	closed   bool
	failures int // connection failures in a row
	// failedRestarts counts the restarts that failed, so that a call that
	// waited for one of them fails with it rather than try another.
	failedRestarts int
	last           *ending   // how the last connection ended, or the last restart failed
	lastAt         time.Time // when
}

// conn is one connection: a session and, for a command, its process.
type conn struct {
	session *mcp.ClientSession
	cmd     *exec.Cmd // nil unless the transport is an *mcp.CommandTransport
	stderr  *tail     // the command's standard error, or nil if not captured

	// ended is closed when the connection has ended and end has been
	// recorded: the session closed and, for a command, the process reaped.
	ended chan struct{}

	mu      sync.Mutex // guards calls, nextID, end, closing
	calls   map[int]call
	nextID  int
	end     *ending // set once, when the connection ends
	closing bool    // Server.Close is closing it: its end is no failure
}

// call is a tools/call in flight.
type call struct {
	tool   string
	cancel context.CancelCauseFunc
}

// ending is how a connection ended, in words for the model.
type ending struct {
	cause error  // the transport's error, or errHung
	what  string // "exited (exit status 3)", "closed the connection"
	next  string // "it will be restarted for the next call (restart 1 of 3)"
	kind  error  // ErrServerExited, ErrNoAnswer for a hung server, ErrServerDown, ErrClosed
}

var (
	errHung        = errors.New("the server did not answer a ping")
	errCallTimeout = errors.New("call timeout")
	errConnEnded   = errors.New("the connection ended")
	// errRestartTimeout is the cause of a restart cut short by its bound.
	errRestartTimeout = errors.New("restart timeout")
)

// Connect connects to the MCP server that dial reaches and returns it as a
// Server named name. The name is used in logs and errors and, by default,
// as the prefix of its tool names (see [ToolName]); give each server of a
// run its own. ctx bounds the connection, including the server's
// initialization; the connection outlives it. opts may be nil.
//
// Connect panics if name is empty or dial is nil.
func Connect(ctx context.Context, name string, dial Dial, opts *Options) (*Server, error) {
	if name == "" {
		panic("mcptool: Connect with an empty server name")
	}
	if dial == nil {
		panic("mcptool: Connect with a nil Dial")
	}
	s := &Server{name: name, dial: dial, connecting: make(chan struct{}, 1)}
	if opts != nil {
		s.opts = *opts
	}
	s.opts.PassEnv = slices.Clone(s.opts.PassEnv)
	s.opts.Env = slices.Clone(s.opts.Env)
	log := s.opts.Logger
	if log == nil {
		log = slog.Default()
	}
	// Every record, the MCP client's included, is redacted: a server's
	// standard error and messages may hold a credential.
	s.log = slog.New(redact.NewHandler(log.Handler()))
	s.client = mcp.NewClient(&mcp.Implementation{Name: "toolrun", Version: version()}, &mcp.ClientOptions{
		Logger: s.log,
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			p := req.Params
			s.log.DebugContext(ctx, "mcptool: MCP tool progress", "server", s.name, "call", fmt.Sprint(p.ProgressToken),
				"progress", p.Progress, "total", p.Total, "message", p.Message)
		},
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			// A change before the tools are listed, as servers that add
			// their tools one by one as they start announce, or a second
			// change before they are listed again, changes nothing
			// anyone has seen: Debug.
			level := slog.LevelDebug
			if s.listed.Swap(false) {
				level = slog.LevelInfo
			}
			s.log.Log(ctx, level, "mcptool: MCP server's tool list changed; call Tools again for a new run to see it", "server", s.name)
		},
	})
	c, err := s.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcptool: connecting to MCP server %q: %w", name, err)
	}
	s.adopt(c)
	s.log.DebugContext(ctx, "mcptool: connected to MCP server", "server", name)
	return s, nil
}

// version is toolrun's module version, for the MCP handshake.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
			if m.Path == "github.com/toolrun/toolrun" && m.Version != "" {
				return m.Version
			}
		}
	}
	return "(devel)"
}

// Name returns the server's name, as given to Connect.
func (s *Server) Name() string { return s.name }

// connect dials and initializes a new connection.
func (s *Server) connect(ctx context.Context) (*conn, error) {
	t, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	c := &conn{ended: make(chan struct{}), calls: map[int]call{}}
	if ct, ok := t.(*mcp.CommandTransport); ok && ct.Command != nil {
		c.cmd = ct.Command
		if c.cmd.Stderr == nil {
			c.stderr = &tail{}
			c.cmd.Stderr = c.stderr
		}
		if c.cmd.WaitDelay == 0 {
			c.cmd.WaitDelay = waitDelay
		}
		grace := ct.TerminateDuration
		if grace <= 0 {
			grace = closeGrace
		}
		c.cmd.Env = childEnv(c.cmd.Env, &s.opts)
		t = &groupTransport{cmd: c.cmd, grace: grace}
	}
	session, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		// A server that cannot start is of no use. The session's Close,
		// which the MCP client calls for a failed initialization, may have
		// given up on the process while its Wait still runs: so it is
		// killed without a look at its ProcessState, which that Wait
		// writes. A process already reaped is left alone by Kill.
		c.kill()
		if msg := c.stderr.String(); msg != "" {
			return nil, fmt.Errorf("%w; its stderr ends with: %s", err, redact.String(lastLine(msg)))
		}
		return nil, err
	}
	c.session = session
	return c, nil
}

// adopt makes c the live connection and watches for its end. It reports
// false, having closed c, if the server was closed meanwhile.
func (s *Server) adopt(c *conn) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.session.Close()
		return false
	}
	s.conn = c
	s.listed.Store(false)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		err := c.session.Wait()
		if err == nil {
			err = errConnEnded
		}
		s.end(c, err, "")
	}()
	return true
}

// acquire returns the live connection, restarting the server if it needs
// to and its policy allows.
func (s *Server) acquire(ctx context.Context, tool string) (*conn, error) {
	for {
		s.mu.Lock()
		closed, c, failed := s.closed, s.conn, s.failedRestarts
		s.mu.Unlock()
		if closed {
			return nil, s.closedError(tool)
		}
		if c != nil {
			return c, nil
		}
		select {
		case s.connecting <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c, err := s.restart(ctx, tool, failed)
		<-s.connecting
		if c != nil || err != nil {
			return c, err
		}
	}
}

// restart starts the server again, if it is still down and its policy
// allows. It returns (nil, nil) when another goroutine connected first, and
// the failure of the last restart if one failed since failedRestarts was
// read: the caller waited for that restart, and fails with it. The caller
// holds the connecting token.
func (s *Server) restart(ctx context.Context, tool string, failedRestarts int) (*conn, error) {
	s.mu.Lock()
	if s.closed || s.conn != nil {
		s.mu.Unlock()
		return nil, nil
	}
	failures, last, lastAt := s.failures, s.last, s.lastAt
	// A restart failed while the caller waited for the token, and no
	// connection has ended since (a restart that failed is the last news).
	waitedFor := s.failedRestarts != failedRestarts && last != nil && last.kind == ErrServerDown
	s.mu.Unlock()

	if waitedFor {
		return nil, &ServerError{Server: s.name, Tool: tool, Kind: ErrServerDown, Err: last.cause,
			msg: fmt.Sprintf("MCP server %q %s; %s", s.name, last.what, last.next)}
	}
	if failures > s.opts.Restart.MaxRestarts {
		return nil, &ServerError{Server: s.name, Tool: tool, Kind: ErrServerDown, Err: last.cause,
			msg: fmt.Sprintf("MCP server %q is down: it %s, and %s", s.name, last.what, last.next)}
	}
	if wait := time.Until(lastAt.Add(s.backoff(failures))); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	bound := s.opts.CallTimeout
	if bound <= 0 {
		bound = restartTimeout
	}
	connCtx, cancel := context.WithTimeoutCause(ctx, bound, errRestartTimeout)
	c, err := s.connect(connCtx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		what := fmt.Sprintf("could not be restarted (%v)", err)
		if context.Cause(connCtx) == errRestartTimeout {
			// The cause is not the context's error: the call's own ctx
			// has not ended, and the runner must not take the failure
			// for its timeout.
			err = fmt.Errorf("the server did not connect and initialize within %s", bound)
			what = fmt.Sprintf("could not be restarted: it did not connect and initialize within %s, and was stopped", bound)
		}
		s.mu.Lock()
		s.failures++
		s.failedRestarts++
		e := &ending{cause: err, what: what, kind: ErrServerDown}
		e.next = s.nextStep()
		s.last, s.lastAt = e, time.Now()
		s.mu.Unlock()
		s.log.ErrorContext(ctx, "mcptool: MCP server could not be restarted", "server", s.name,
			"restart", failures, "max_restarts", s.opts.Restart.MaxRestarts, "error", err.Error())
		return nil, &ServerError{Server: s.name, Tool: tool, Kind: ErrServerDown, Err: err,
			msg: fmt.Sprintf("MCP server %q %s; %s", s.name, e.what, e.next)}
	}
	if !s.adopt(c) {
		return nil, s.closedError(tool)
	}
	s.log.InfoContext(ctx, "mcptool: MCP server restarted", "server", s.name,
		"restart", failures, "max_restarts", s.opts.Restart.MaxRestarts)
	return c, nil
}

// backoff returns the wait before the restart that follows failures
// failures in a row.
func (s *Server) backoff(failures int) time.Duration {
	return s.opts.Restart.Backoff << min(max(failures-1, 0), 5)
}

// nextStep says what the policy does after s.failures failures in a row.
// The caller holds s.mu.
func (s *Server) nextStep() string {
	limit := s.opts.Restart.MaxRestarts
	switch {
	case limit <= 0:
		return "it is not restarted, as its restart policy allows no restarts"
	case s.failures <= limit:
		return fmt.Sprintf("it will be restarted for the next call (restart %d of %d)", s.failures, limit)
	}
	return fmt.Sprintf("it is not restarted: it failed %d times in a row, and its restart policy allows %d restarts", s.failures, limit)
}

// healthy records that a call on c succeeded: the failures in a row are
// over.
func (s *Server) healthy(c *conn) {
	s.mu.Lock()
	if s.conn == c {
		s.failures = 0
	}
	s.mu.Unlock()
}

// end records that c ended because of cause, stops it, and logs why. hung
// names the tool whose call found the server hung, or is empty if it
// exited. end returns how c ended; calling it again, from any goroutine,
// waits for the first call and returns the same.
func (s *Server) end(c *conn, cause error, hung string) *ending {
	c.mu.Lock()
	if c.end != nil {
		c.mu.Unlock()
		<-c.ended
		return c.end
	}
	e := &ending{cause: cause, kind: ErrServerExited}
	c.end = e
	closing := c.closing
	var inFlight []string
	for _, cl := range c.calls {
		inFlight = append(inFlight, cl.tool)
		cl.cancel(errConnEnded)
	}
	c.mu.Unlock()
	slices.Sort(inFlight)

	if closing {
		// Server.Close is closing the session, gracefully.
		e.what, e.next, e.kind = "was closed", "it was closed", ErrClosed
		s.mu.Lock()
		if s.conn == c {
			s.conn = nil
		}
		s.mu.Unlock()
		close(c.ended)
		return e
	}
	if hung != "" || c.cmd != nil {
		// A hung server is stopped for good; a command whose connection
		// broke is of no use even if it still runs, and killing it makes
		// closing the session prompt.
		c.kill()
	}
	c.session.Close()

	switch {
	case hung != "":
		e.kind = ErrNoAnswer
		e.what = fmt.Sprintf("did not answer the call of %q within %s, nor a ping after it, and was stopped", hung, s.opts.CallTimeout)
	case c.cmd != nil && c.cmd.ProcessState != nil:
		e.what = fmt.Sprintf("exited (%s)", c.cmd.ProcessState)
	default:
		// The cause is in the log; which of the errors of a dropped
		// connection comes first is down to chance.
		e.what = "closed the connection"
	}
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
	}
	if s.closed {
		e.next, e.kind = "it was closed", ErrClosed
		s.mu.Unlock()
		close(c.ended)
		return e
	}
	s.failures++
	s.last, s.lastAt = e, time.Now()
	e.next = s.nextStep()
	failures := s.failures
	s.mu.Unlock()

	attrs := []any{"server", s.name, "error", cause.Error(), "in_flight", inFlight}
	if c.cmd != nil && c.cmd.ProcessState != nil {
		attrs = append(attrs, "exit", c.cmd.ProcessState.String())
	}
	if msg := c.stderr.String(); msg != "" {
		attrs = append(attrs, "stderr", msg)
	}
	attrs = append(attrs, "failures", failures, "next", e.next)
	msg := "mcptool: MCP server exited"
	if hung != "" {
		msg = "mcptool: MCP server hung and was stopped"
	} else if c.cmd == nil {
		msg = "mcptool: MCP server connection lost"
	}
	s.log.Error(msg, attrs...)
	close(c.ended)
	return e
}

// kill kills c's process and its process group, if it has a process.
func (c *conn) kill() {
	if c.cmd != nil && c.cmd.Process != nil {
		signalGroup(c.cmd.Process.Pid, syscall.SIGKILL)
		c.cmd.Process.Kill()
	}
}

// endError returns the failure of a call of tool on a connection that
// ended as e.
func (s *Server) endError(e *ending, tool string) error {
	if e.kind == ErrClosed {
		return s.closedError(tool)
	}
	var msg string
	switch {
	case e.kind == ErrNoAnswer:
		msg = fmt.Sprintf("MCP server %q %s; %s", s.name, e.what, e.next)
	case tool == "":
		msg = fmt.Sprintf("MCP server %q %s while listing its tools; %s", s.name, e.what, e.next)
	default:
		msg = fmt.Sprintf("MCP server %q %s while handling %q; %s", s.name, e.what, tool, e.next)
	}
	return &ServerError{Server: s.name, Tool: tool, Kind: e.kind, Err: e.cause, msg: msg}
}

func (s *Server) closedError(tool string) error {
	return &ServerError{Server: s.name, Tool: tool, Kind: ErrClosed, msg: fmt.Sprintf("MCP server %q is closed", s.name)}
}

// begin registers a call of tool on c and returns its context, or false
// if c has ended. The caller must call finish.
func (c *conn) begin(ctx context.Context, tool string) (context.Context, int, bool) {
	ctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end != nil {
		cancel(errConnEnded)
		return ctx, 0, false
	}
	c.nextID++
	c.calls[c.nextID] = call{tool: tool, cancel: cancel}
	return ctx, c.nextID, true
}

func (c *conn) finish(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.calls[id]; ok {
		cl.cancel(nil)
		delete(c.calls, id)
	}
}

// hasEnded reports whether c has ended.
func (c *conn) hasEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.end != nil
}

// Close closes the connection. A command's standard input is closed
// first; if the command, or a process of its process group, is still
// running 500ms later (the transport's TerminateDuration, if set), the
// group is sent SIGTERM, and after as long again SIGKILL. So a server
// that a launcher (npx, uvx, sh -c) started stops with the launcher. On
// systems without process groups (Windows), the command alone is signalled
// and the processes it started are left to it. Calls in flight fail with
// [ErrClosed], as do later calls. Close waits for the command to exit. It
// returns nil for a normal shutdown: an exit with status 0, or by the
// SIGTERM or SIGKILL that Close sent. It returns the command's failure
// otherwise, such as an exit with another status. Calling Close again
// does nothing.
//
// A program should call Close when it is interrupted, as the toolrun
// command does on SIGINT and SIGTERM: a server in a group of its own does
// not get the terminal's Ctrl-C, and if the program dies without Close it
// sees only the end of its standard input.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	var err error
	if c != nil {
		c.mu.Lock()
		c.closing = true
		for _, cl := range c.calls {
			cl.cancel(ErrClosed)
		}
		c.mu.Unlock()
		err = c.session.Close()
		if c.cmd != nil && stoppedByClose(c.cmd.ProcessState) {
			err = nil
		}
	}
	s.wg.Wait()
	return err
}

// stoppedByClose reports whether a command that Close stopped ended
// normally: with status 0, or by the signals that Close sends.
func stoppedByClose(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	if ps.Success() {
		return true
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGKILL)
}
