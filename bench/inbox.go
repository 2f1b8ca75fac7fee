package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// inboxResult is what the inbox workload measured in headless Chromium:
// the page's load and its filters with Pending calls waiting, in
// milliseconds by the page's own clock, one sample a round.
type inboxResult struct {
	Pending int
	// Load is from the navigation's start to every call listed; Filter is
	// a thread filter's keystroke to the narrowed list laid out, Shown the
	// calls it keeps; Clear is the filter's removal to all the calls laid
	// out again.
	Load, Filter, Clear []float64
	Shown               int
	// Skipped says why the workload did not run (no Chromium), or is "".
	Skipped string
}

// inboxFilter is the thread filter the workload types: it keeps the
// threads whose id contains it (t1, t10–t19, t100–t199, ...).
const inboxFilter = "t1"

// chromiumBinary returns the path of Chromium, or "" where there is none.
func chromiumBinary() string {
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// runInbox brings cfg.inboxPending calls to await approval on a serve
// server, logs in to its inbox in headless Chromium, and measures, each
// round, a fresh load of the page and a thread filter typed and cleared.
// Without Chromium it measures nothing and says so, unless CI is set.
func runInbox(ctx context.Context, cfg config, progress io.Writer) (*inboxResult, error) {
	res := &inboxResult{Pending: cfg.inboxPending}
	bin := chromiumBinary()
	if bin == "" {
		if os.Getenv("CI") != "" {
			return nil, errors.New("inbox: missing component: Chromium, and CI is set; install it with: apt-get install -y --no-install-recommends chromium")
		}
		res.Skipped = "no Chromium (apt-get install -y --no-install-recommends chromium)"
		fmt.Fprintln(progress, "inbox: skipped:", res.Skipped)
		return res, nil
	}
	model, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer model.Close()
	sb, err := newServeBench(ctx, model.URL, 64)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	start := time.Now()
	if _, err := sb.pendMany(ctx, cfg.inboxPending); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	fmt.Fprintf(progress, "inbox: %d pending calls in %v\n", cfg.inboxPending, time.Since(start).Round(time.Millisecond))

	dir, err := os.MkdirTemp("", "toolrun-bench-chromium")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(dir),
		chromedp.Flag("no-first-run", true), chromedp.Flag("disable-background-networking", true))
	defer cancelAlloc()
	bctx, cancelB := chromedp.NewContext(alloc)
	defer cancelB()
	tctx, cancelT := context.WithTimeout(bctx, 5*time.Minute)
	defer cancelT()
	if err := chromedp.Do(tctx,
		chromedp.Navigate(sb.url+"/inbox/login"),
		chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", serveToken),
		chromedp.Click("#login"),
		chromedp.WaitReady("body[data-loaded]"),
	); err != nil {
		return nil, fmt.Errorf("inbox: logging in: %w", err)
	}
	listed := fmt.Sprintf(`document.body.dataset.loaded && document.querySelectorAll("#list li").length === %d`, cfg.inboxPending)
	for round := range cfg.inboxRounds {
		if err := chromedp.Do(tctx, chromedp.Navigate(sb.url+"/inbox")); err != nil {
			return nil, fmt.Errorf("inbox: loading: %w", err)
		}
		if _, err := chromedp.Run(tctx, chromedp.Poll[chromedp.Void](listed, chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
			return nil, fmt.Errorf("inbox: waiting for %d calls listed: %w", cfg.inboxPending, err)
		}
		// The page stamps data-loaded (Date.now()) once it has rendered
		// the list; timeOrigin is the navigation's start.
		load, err := chromedp.Run(tctx, chromedp.Evaluate[float64](`Number(document.body.dataset.loaded) - performance.timeOrigin`))
		if err != nil {
			return nil, fmt.Errorf("inbox: reading the load time: %w", err)
		}
		// The filter listens for input events and renders at once; reading
		// the list's size forces the layout, which the time includes.
		var f struct {
			Filter, Clear float64
			Shown, All    int
		}
		f, err = chromedp.Run(tctx, chromedp.Evaluate[struct {
			Filter, Clear float64
			Shown, All    int
		}](`(() => {
  const input = document.getElementById("f-thread"), list = document.getElementById("list");
  const type = (v) => { input.value = v; input.dispatchEvent(new Event("input", {bubbles: true})); list.getBoundingClientRect(); };
  let t0 = performance.now();
  type(`+fmt.Sprintf("%q", inboxFilter)+`);
  const filter = performance.now() - t0, shown = list.children.length;
  t0 = performance.now();
  type("");
  return {Filter: filter, Clear: performance.now() - t0, Shown: shown, All: list.children.length};
})()`))
		if err != nil {
			return nil, fmt.Errorf("inbox: filtering: %w", err)
		}
		if want := threadsContaining(cfg.inboxPending, inboxFilter); f.Shown != want || f.All != cfg.inboxPending {
			return nil, fmt.Errorf("inbox: the filter %q showed %d calls and its removal %d, want %d and %d", inboxFilter, f.Shown, f.All, want, cfg.inboxPending)
		}
		res.Load = append(res.Load, load)
		res.Filter = append(res.Filter, f.Filter)
		res.Clear = append(res.Clear, f.Clear)
		res.Shown = f.Shown
		fmt.Fprintf(progress, "inbox %d pending, round %d/%d: load %.1f ms, filter %.1f ms (%d shown), clear %.1f ms\n",
			cfg.inboxPending, round+1, cfg.inboxRounds, load, f.Filter, f.Shown, f.Clear)
	}
	return res, sb.Close()
}

// threadsContaining counts the threads t1 … tN (newServeBench's ids of
// a fresh server's first n pending runs) whose id contains s.
func threadsContaining(n int, s string) int {
	c := 0
	for i := 1; i <= n; i++ {
		if strings.Contains(fmt.Sprintf("t%d", i), s) {
			c++
		}
	}
	return c
}

// rows are the inbox workload's rows of the table.
func (in *inboxResult) rows() []row {
	w := fmt.Sprintf("inbox: %s pending calls in headless Chromium", thousands(in.Pending))
	one := func(measure string, xs []float64) row {
		v := na
		if in.Skipped != "" {
			v = "skipped: " + in.Skipped
		} else if len(xs) > 0 {
			v = fmt.Sprintf("%.1f ms", median(xs))
		}
		return row{w, fmt.Sprintf("%s (median of %d)", measure, len(xs)), na, na, v, "—", "—", "", "—"}
	}
	return []row{
		one("page load: navigation start → every call listed", in.Load),
		one(fmt.Sprintf("thread filter typed → %d calls laid out", in.Shown), in.Filter),
		one("filter cleared → every call laid out", in.Clear),
	}
}
