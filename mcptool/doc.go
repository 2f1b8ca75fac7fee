// Package mcptool offers the tools of MCP (Model Context Protocol) servers
// as [toolrun.Tool] values, so that a [toolrun.Runner] runs them as it runs
// Go tools: with the same approval policies, timeouts, logging and events.
// It is built on the official MCP SDK, github.com/modelcontextprotocol/go-sdk.
//
// [Connect] connects to a server through a [Dial]: [Command] runs a program
// and talks to it over stdio, [StreamableHTTP] reaches a server over HTTP,
// and [InMemory] serves an *mcp.Server of this process. [Server.Tools] lists
// the server's tools, every page of them:
//
//	github, err := mcptool.Connect(ctx, "github", mcptool.Command("github-mcp-server", "stdio"), &mcptool.Options{
//		Restart:     mcptool.RestartPolicy{MaxRestarts: 3, Backoff: time.Second},
//		CallTimeout: 2 * time.Minute,
//		ConfigFor: func(t *mcp.Tool) toolrun.ToolConfig {
//			if t.Name == "merge_pull_request" {
//				return toolrun.ToolConfig{Policy: policy.RequireApproval("merges a pull request")}
//			}
//			return toolrun.ToolConfig{}
//		},
//	})
//	if err != nil {
//		return err
//	}
//	defer github.Close()
//	tools, err := github.Tools(ctx)
//	if err != nil {
//		return err
//	}
//	r := toolrun.New(client, params, append(tools, myGoTools...), nil)
//
// # Names
//
// The model sees each tool under the server's name, two underscores and the
// tool's name, so that the search tools of the servers "github" and "jira"
// become "github__search" and "jira__search"; [ToolName] gives the name, for
// [github.com/toolrun/toolrun/policy.DenyTools] and [github.com/toolrun/toolrun/policy.AllowOnly]. [Options.Rename] chooses
// other names. The server receives each call under its own name.
//
// # Listings
//
// A server's listing is bounded: [Options.MaxTools] tools (500 by
// default) and [Options.MaxSchemaBytes] of input schemas (4 MiB); the
// excess is left out with a log record. The tools of several servers can
// collide once prefixed ("a" with "b__c", "a__b" with "c"); [AllTools]
// gathers the tools of several servers and refuses such a set with a
// [*CollisionError] naming both, and [CheckNames] checks a set that holds
// Go tools too, before [toolrun.New] would panic on it.
//
// # Results
//
// Text, images, embedded resources (text, images, PDFs) and resource links
// become content blocks; content the model cannot take, such as audio,
// becomes a short text that says what was left out. A result the server
// marks isError reaches the model as an is_error tool_result with the
// server's text, and the caller as a [*ToolError].
//
// # Failures
//
// A server that exits, or drops its connection, while it handles a call
// fails that call with [ErrServerExited], in words that tell the model
// what happened and whether the server will be restarted. The operator
// gets a log record at Error with the tools in flight and, for a command,
// its exit status and the end of its standard error.
//
// A server that does not answer a call within [Options.CallTimeout] fails
// it with [ErrNoAnswer]. It is then pinged: a server that answers is kept,
// one that does not is deemed hung and is stopped, as if it had exited.
//
// Whether a server that exited or hung is started again is up to its
// [RestartPolicy]; by default it is not, and later calls fail with
// [ErrServerDown]. A restart is made by the next call, after a backoff;
// the failed call is never run again, as it may not be idempotent. A
// restart is bounded: a server that has not connected and answered its
// initialization within [Options.CallTimeout], or a minute if that is
// zero, is stopped and the restart fails with [ErrServerDown], as do the
// calls that waited for it, so that a server that hangs as it starts
// cannot hold its calls for ever.
//
// # Containment
//
// A server is other people's code. Every record the package logs, the MCP
// client's and the end of a server's standard error included, passes
// through the redaction a toolrun runner's log gets (see
// toolrun.Options.Logger for what it removes). A command's child does not inherit this
// process's environment: it gets [DefaultEnv], the variables that
// [Options.PassEnv] names and those [Options.Env] sets, and never an
// ANTHROPIC_* variable or one whose name says it holds a secret unless
// they name it. A command runs in a process group of its own, on Unix, so
// that stopping it stops whatever it started. [Server.Close] closes a
// command's standard input, and stops its group with SIGTERM, then SIGKILL,
// if a process of it still runs 500ms later; an exit by those signals is a
// normal shutdown. A connection that fails, to start or later, kills the
// group at once. A process that leaves the group on purpose (a daemon
// started with setsid, say) is out of its reach: no signal to the group
// finds it, and only the operating system's own containment (a cgroup, a
// container) stops it.
package mcptool
