package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/chromedp/chromedp"
)

// inboxResult is what the inbox workload measured in headless Chromium
// with Pending calls waiting, in milliseconds by the page's own clock,
// one sample a round.
type inboxResult struct {
	Pending int
	// Load is from the navigation's start to the first page of calls
	// listed; Decide from Approve pressed to the decision acknowledged on
	// the page.
	Load, Decide []float64
	// Skipped says why the workload did not run (no Chromium), or is "".
	Skipped string
}

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
	page := min(cfg.inboxPending, 100) // the inbox's page
	listed := fmt.Sprintf(`document.body.dataset.loaded && document.querySelectorAll("#list li").length === %d`, page)
	poll := func(js string) error {
		_, err := chromedp.Run(tctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(2*time.Millisecond)))
		return err
	}
	for round := range cfg.inboxRounds {
		if err := chromedp.Do(tctx, chromedp.Navigate(sb.url+"/inbox")); err != nil {
			return nil, fmt.Errorf("inbox: loading: %w", err)
		}
		if err := poll(listed); err != nil {
			return nil, fmt.Errorf("inbox: waiting for the first %d calls listed: %w", page, err)
		}
		// The page stamps data-loaded (Date.now()) once it has rendered
		// the list; timeOrigin is the navigation's start.
		load, err := chromedp.Run(tctx, chromedp.Evaluate[float64](`Number(document.body.dataset.loaded) - performance.timeOrigin`))
		if err != nil {
			return nil, fmt.Errorf("inbox: reading the load time: %w", err)
		}
		// Each measure runs in the page: an action, then a wait (every
		// millisecond) for the page's stamp that it is done, by the page's
		// clock. A decision is acknowledged when the page says it was
		// taken; data-listed is stamped at each render of the list.
		inPage := func(what, act, done string) (float64, error) {
			v, err := chromedp.Run(tctx, chromedp.Evaluate[float64](`new Promise((resolve, reject) => {
  const t0 = Date.now();
  `+act+`;
  const iv = setInterval(() => {
    if (`+done+`) { clearInterval(iv); resolve(Date.now() - t0); }
    else if (Date.now() - t0 > 60000) { clearInterval(iv); reject(new Error(document.getElementById("flash").textContent)); }
  }, 1);
})`, chromedp.EvalAwaitPromise))
			if err != nil {
				return 0, fmt.Errorf("inbox: %s: %w", what, err)
			}
			return v, nil
		}
		decide, err := inPage("a decision", `const f = document.getElementById("flash"); f.textContent = ""; f.className = ""; document.getElementById("approve").click()`,
			`f.className === "ok" && f.textContent.startsWith("Approved ")`)
		if err != nil {
			return nil, err
		}
		res.Load = append(res.Load, load)
		res.Decide = append(res.Decide, decide)
		fmt.Fprintf(progress, "inbox %d pending, round %d/%d: first rows %.1f ms, decision acknowledged %.1f ms\n",
			cfg.inboxPending, round+1, cfg.inboxRounds, load, decide)
	}
	return res, sb.Close()
}

// rows are the inbox workload's rows of the table.
func (in *inboxResult) rows() []row {
	w := fmt.Sprintf("inbox: %s pending calls in headless Chromium", thousands(in.Pending))
	one := func(measure string, xs []float64, target float64) row {
		v, tgt, met := na, "", "—"
		if in.Skipped != "" {
			v = "skipped: " + in.Skipped
		} else if len(xs) > 0 {
			v = fmt.Sprintf("%.1f ms", median(xs))
		}
		if target > 0 {
			tgt = fmt.Sprintf("< %.0f ms", target)
			if len(xs) > 0 && in.Skipped == "" {
				met = map[bool]string{true: "yes", false: "no"}[median(xs) < target]
			}
		}
		return row{w, fmt.Sprintf("%s (median of %d)", measure, len(xs)), na, na, v, "—", "—", tgt, met}
	}
	return []row{
		one("first rows: navigation start → the first page of calls listed", in.Load, 300),
		one("decision: Approve pressed → acknowledged on the page", in.Decide, 100),
	}
}
