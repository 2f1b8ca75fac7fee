// Command bench measures toolrun side by side with the official client's
// tool runner (BetaToolRunner) and with a hand-written loop on the same
// client that does nothing but send and append (the floor), and prints a
// markdown table of the figures, toolrun's ratios to the other two, and the
// targets. From the repository root:
//
//	go run ./bench -o BENCHMARKS.md
//
// writes the table into BENCHMARKS.md as well, between its markers. The run
// takes 4–6 minutes on a busy 2-core machine, and the serve and inbox
// workloads (their 10,000 and 1,000 pending runs) several more. Flags:
//
//	-run history,wire,pause,parallel,wide,stores,suspended,concurrent,serve,stalled,inbox the workloads to run (all by default)
//	-quick                                       fewer rounds and runs, to check the harness, not to quote
//	-o file                                      also write the table into file
//	-cpuprofile file                             CPU profile of the harness process (history, parallel)
//	-heapprofile file                            heap profile of toolrun's suspended runs while held
//
// # Workloads
//
// Every runner runs the same scripted conversations against the same fake
// server, [github.com/toolrun/toolrun/toolruntest], which runs in a child
// process, so that what the harness measures in its own process is the
// client's cost alone: the runner, the anthropic client's encoding and
// decoding, and HTTP over loopback.
//
//   - history: conversations of 10, 100 and 500 turns, each turn a call of a
//     trivial tool, the last an answer. Client CPU time (getrusage) and heap
//     allocations (runtime.MemStats) per turn, and how they grow with the
//     history.
//   - parallel: one turn that calls a 100 ms tool 8 times. Wall time from
//     the response with the calls arriving to the request with their
//     results going out, taken by a client middleware.
//   - pause: a model that stops with pause_turn 300 times in a row, then
//     answers: the request bytes in all and the largest request, for the
//     official runner and toolrun (the hand loop stops at a pause).
//   - wide: one turn that calls a 25 ms tool 100 times, each runner at its
//     default options (toolrun's default MaxParallelTools is to cost at most
//     1.2× the official runner's turn, which runs every call at once).
//     Wall time of the tool turn, taken as for parallel.
//   - stores: one turn of 100 and of 400 calls of a tool with a 200-byte
//     result, run by toolrun with no Store, with a filestore.Store and with
//     sqlitestore, each in a fresh directory under os.TempDir, beside the
//     floor: one synced append per call of its input and result, on the
//     same disk. Wall time, and bytes written (write syscalls, less the
//     run's requests), and how both grow with the calls.
//   - suspended: 10,000 runs whose second turn calls a tool that needs
//     approval, held in memory, in a child process: live heap per run, held
//     as runners and as serialised state. The official runner cannot suspend
//     a run.
//   - concurrent: 1,000 runs of 5 turns at once, each runner in a child
//     process of its own: turns per second, client CPU per turn, peak RSS.
//   - serve: the server of package [github.com/toolrun/toolrun/serve] in
//     the harness's process, on loopback, on a SQLite database in a
//     temporary file, with one token whose run cap lets every run in.
//     200 runs of 5 turns at once through it (each an AG-UI POST whose
//     events are read to the end) beside the same runs through a toolrun
//     Runner in process, same tools and options: the wall time and the
//     process's CPU per run, and their ratio. Then 10,000 runs stopped at
//     a call awaiting approval: the live heap and the database bytes they
//     add per run, and GET /api/pending of all of them (time and bytes).
//     Then 100 of those calls decided over the JSON API (the thread
//     continued by the server, or else its next run posted at once), and
//     100 by an AG-UI resume, one at a time: p50
//     and p99 from the decision's response (for a resume, its request
//     going out) to the tool's start, which the tool records.
//   - stalled: such a server (serve.Config's defaults) after one run whose
//     answer is 12 MiB: 40 clients that GET that run's events and never
//     read them, beside none, in alternating order over 3 rounds. The
//     server's live heap after a collection (and per stalled reader), the
//     process's RSS once freed memory is returned, the median latency of
//     20 plain runs one after another, and the live heap once the readers
//     have gone. The hand column is no stalled reader, the toolrun column
//     the 40, so that the ratio reads stalled ÷ none.
//   - inbox: 10,000 calls awaiting approval on such a server, and its
//     /inbox page in headless Chromium (chromedp), logged in with the
//     token: the first rows (navigation start to the first page listed;
//     target under 300 ms), a decision (Approve pressed to its
//     acknowledgement on the page; target under 100 ms), by the page's
//     clock. Without Chromium it is skipped, unless CI is set.
//
// The three runners run interleaved, in an order that rotates each round,
// and the table shows medians over the rounds. The serve rows put the
// Runner in process in the hand column and serve in the toolrun column,
// so that the ratio column reads serve ÷ in process.
//
// The same workloads are go test benchmarks, one runner at a time, for
// profiling:
//
//	go test ./bench -run '^$' -bench 'History/turns=500/toolrun' -cpuprofile cpu.out
package main
