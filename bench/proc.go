package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childEnv names the environment variable that makes the binary a child of
// the harness: its value is a JSON [childSpec]. The harness re-executes its
// own binary (the `go run` build, or the test binary) for the fake server and
// for the phases that must measure a process of their own.
const childEnv = "TOOLRUN_BENCH_CHILD"

// childSpec tells a child process what to do.
type childSpec struct {
	Role   string `json:"role"` // "server", "concurrent" or "suspended"
	URL    string `json:"url,omitempty"`
	Runner string `json:"runner,omitempty"`
	Runs   int    `json:"runs,omitempty"`
	Turns  int    `json:"turns,omitempty"`
	// HeapProfile, for a suspended child, is where to write a heap profile
	// while the runs are held, every HeapProfileRate bytes allocated
	// sampled (every allocation if 0).
	HeapProfile     string `json:"heap_profile,omitempty"`
	HeapProfileRate int    `json:"heap_profile_rate,omitempty"`
	// CPUProfile, for a concurrent child, is where to write a CPU profile
	// of its runs.
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// childMain runs the child that spec describes, if the environment names
// one, and reports whether it did and with what exit code.
func childMain() (code int, ok bool) {
	v := os.Getenv(childEnv)
	if v == "" {
		return 0, false
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "bench child: bad %s: %v\n", childEnv, err)
		return 2, true
	}
	var out any
	var err error
	switch spec.Role {
	case "server":
		err = serveChild()
	case "concurrent":
		out, err = concurrentChild(spec)
	case "suspended":
		out, err = suspendedChild(spec)
	default:
		err = fmt.Errorf("unknown role %q", spec.Role)
	}
	if err == nil && out != nil {
		err = json.NewEncoder(os.Stdout).Encode(out)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child %s: %v\n", spec.Role, err)
		return 1, true
	}
	return 0, true
}

// childCommand returns the command that runs spec in a child process.
func childCommand(ctx context.Context, spec childSpec) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	// A binary built with -race sleeps a second before it exits, by
	// default; the children of a test under the race detector need not.
	race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(slices.Clone(os.Environ()), childEnv+"="+string(b), "GORACE="+race)
	return cmd, nil
}

// runChild runs spec in a child process and decodes its JSON output into out.
func runChild(ctx context.Context, spec childSpec, out any) error {
	cmd, err := childCommand(ctx, spec)
	if err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s child: %v: %s", spec.Role, err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("%s child: decoding its output %q: %v", spec.Role, stdout.String(), err)
	}
	return nil
}

// fakeServer is a toolruntest server running in a child process, so that
// the CPU, allocations and memory the harness measures are the client's
// alone.
type fakeServer struct {
	URL    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
}

// startServer starts a fake server in a child process. The child serves
// until Close closes its stdin, or the harness dies.
func startServer(ctx context.Context) (*fakeServer, error) {
	cmd, err := childCommand(ctx, childSpec{Role: "server"})
	if err != nil {
		return nil, err
	}
	s := &fakeServer{cmd: cmd}
	cmd.Stderr = &s.stderr
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		s.stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("fake server did not start: %v: %s", err, s.stderr.String())
	}
	s.URL = strings.TrimSpace(line)
	return s, nil
}

// Close stops the server and reports what went wrong on its side: any
// request it rejected is a bug in a workload, not noise.
func (s *fakeServer) Close() error {
	s.stdin.Close()
	err := s.cmd.Wait()
	httpClient.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("fake server: %v: %s", err, strings.TrimSpace(s.stderr.String()))
	}
	return nil
}

// cpu returns the CPU time, user and system, that the server's process has
// used, from /proc (in clock ticks of 10 ms), or 0 where there is none.
func (s *fakeServer) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses:
	// utime and stime are the 14th and 15th of the line.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / clockTicks)
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100
// on every Linux the harness runs on.
const clockTicks = 100

// cpuTime returns the CPU time, user and system, that the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatus returns a size field of /proc/self/status (VmHWM, VmRSS) in
// bytes, or 0 where there is none.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		return kb << 10
	}
	return 0
}

// usage is what a measured stretch of the process cost.
type usage struct {
	Wall    time.Duration `json:"wall"`
	CPU     time.Duration `json:"cpu"`
	Mallocs uint64        `json:"mallocs"`
	Bytes   uint64        `json:"bytes"`
}

// meter measures a stretch of the process: CPU time from getrusage, heap
// allocations from runtime.MemStats, as `go test -benchmem` counts them.
type meter struct {
	start time.Time
	cpu   time.Duration
	ms    runtime.MemStats
}

// startMeter collects the garbage left by what ran before, so that it is
// not billed to what is measured next, and starts measuring.
func startMeter() *meter {
	runtime.GC()
	m := &meter{}
	runtime.ReadMemStats(&m.ms)
	m.cpu = cpuTime()
	m.start = time.Now()
	return m
}

func (m *meter) stop() usage {
	wall := time.Since(m.start)
	cpu := cpuTime() - m.cpu
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{Wall: wall, CPU: cpu, Mallocs: ms.Mallocs - m.ms.Mallocs, Bytes: ms.TotalAlloc - m.ms.TotalAlloc}
}

// liveHeap returns the bytes of live heap objects after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// machine describes where the benchmarks ran.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), GOMAXPROCS %d, %s %s/%s", runtime.NumCPU(), model,
		runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// loadAverage returns the 1-minute load average, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// errWrongTurns reports a run that took another number of turns than its
// script: the workload did not run as written.
var errWrongTurns = errors.New("wrong number of turns")
