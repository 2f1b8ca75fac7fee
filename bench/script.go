package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun/toolruntest"
)

// A workload is named by the run's first user message, so that one fake
// server answers every workload, for every runner, the same way:
//
//	workload=echo turns=N      N-1 turns that each call echo once, then an answer
//	workload=parallel tools=K  one turn that calls sleep K times, then an answer
//	workload=pause pauses=N    N replies that stop with pause_turn, then an answer
//	workload=approve           a turn that calls echo, a turn that calls deploy
//	                           (which needs approval), then an answer
//	workload=big bytes=N       an answer of N bytes of text
//
// Each tool turn carries a short text block and the tool_use blocks, as the
// model's turns do.
func prompt(kind string, n int) string {
	switch kind {
	case "echo":
		return "workload=echo turns=" + strconv.Itoa(n)
	case "parallel":
		return "workload=parallel tools=" + strconv.Itoa(n)
	case "pause":
		return "workload=pause pauses=" + strconv.Itoa(n)
	case "big":
		return "workload=big bytes=" + strconv.Itoa(n)
	}
	return "workload=" + kind
}

// script is the fake model: it answers req by the workload its first
// message names and the number of turns so far. On a message thread it
// reads the whole conversation the thread holds.
func script(req *toolruntest.Request) toolruntest.Reply {
	msgs := req.Conversation
	var first string
	if len(msgs) > 0 && len(msgs[0].Content) > 0 {
		first = msgs[0].Content[0].Text
	}
	args := map[string]string{}
	for _, f := range strings.Fields(first) {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = v
		}
	}
	turn := (len(msgs) + 1) / 2 // the prompt, then an assistant turn and its results per turn
	done := toolruntest.Message(toolruntest.Text(fmt.Sprintf("Done after %d turns.", turn)))
	call := func(name string, i int) toolruntest.Block {
		return toolruntest.ToolUse(fmt.Sprintf("toolu_%d_%d", turn, i), name, toolInput{S: fmt.Sprintf("turn %d call %d", turn, i)})
	}
	switch args["workload"] {
	case "pause":
		// Each pause adds its reply to the conversation, and nothing else.
		n, _ := strconv.Atoi(args["pauses"])
		if paused := len(msgs) - 1; paused < n {
			return toolruntest.Reply{StopReason: "pause_turn",
				Content: []toolruntest.Block{toolruntest.Text(fmt.Sprintf("Searching the web, part %d of the answer...", paused+1))}}
		}
		return toolruntest.Message(toolruntest.Text("Found it."))
	case "echo":
		n, _ := strconv.Atoi(args["turns"])
		if turn >= n {
			return done
		}
		return toolruntest.Message(toolruntest.Text(fmt.Sprintf("Step %d: checking.", turn)), call("echo", 0))
	case "parallel":
		if turn > 1 {
			return done
		}
		k, _ := strconv.Atoi(args["tools"])
		blocks := []toolruntest.Block{toolruntest.Text("Running them all at once.")}
		for i := range k {
			blocks = append(blocks, call("sleep", i))
		}
		return toolruntest.Message(blocks...)
	case "big":
		n, _ := strconv.Atoi(args["bytes"])
		return toolruntest.Message(toolruntest.Text(strings.Repeat("All work and no play. ", n/22+1)[:n]))
	case "approve":
		switch turn {
		case 1:
			return toolruntest.Message(toolruntest.Text("Checking first."), call("echo", 0))
		case 2:
			return toolruntest.Message(toolruntest.Text("Deploying now."), call("deploy", 0))
		}
		return done
	}
	return toolruntest.Reply{Fault: toolruntest.Fault{Status: http.StatusBadRequest, Message: "bench: unknown workload in " + strconv.Quote(first)}}
}

// serveChild serves script until stdin closes, then reports the server's
// errors, if any, and fails.
func serveChild() error {
	// The server keeps every request it receives, so its heap grows with
	// the run; fewer collections keep it from slowing the harness down on
	// a small machine. This process is not measured.
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(4 << 30)
	s := toolruntest.New(nil, toolruntest.Options{Func: script})
	fmt.Println(s.URL)
	io.Copy(io.Discard, os.Stdin)
	s.Close()
	errs := s.Errors()
	if len(errs) == 0 {
		return nil
	}
	for _, err := range errs[:min(len(errs), 5)] {
		fmt.Fprintln(os.Stderr, err)
	}
	return fmt.Errorf("%d requests failed on the server", len(errs))
}

// httpClient is the HTTP client of every runner: the fake server is in
// another process, and 1,000 concurrent runs each keep a connection.
var httpClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 2048
	return &http.Client{Transport: t}
}()

// newClient returns the anthropic client all three runners share, for the
// fake server at url. It does not retry: a failed request fails the
// benchmark instead of hiding in the figures.
func newClient(url string, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithHTTPClient(httpClient),
		option.WithBaseURL(url),
		option.WithAPIKey(toolruntest.TestAPIKey),
		option.WithMaxRetries(0),
	}, opts...)...)
}
