package transcript_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/draw"
	pngenc "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
	"github.com/toolrun/toolrun/transcript"
)

// The payloads of TestReportInChromium: each would change the page if it
// ran.
const (
	scriptPayload = `<script>document.title='pwned'</script>`
	imgPayload    = `<img src=x onerror="document.body.dataset.pwned=1">`
)

// chromium returns the path of Chromium, or skips the test if it is not
// installed, unless CI is set: in CI the test must run.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set and chromium is not installed; install it with: apt-get install -y chromium")
	}
	t.Skip("missing component: chromium (apt-get install -y chromium); skipping the browser test")
	return ""
}

// runChromium runs headless Chromium with args after the common flags and
// returns its standard output. A hang is cut off by the timeout.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(flags, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("chromium %v hung and was killed\n%s", args, stderr.Bytes())
		}
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// browserRun records a run that makes a good report: tools that take a
// while, one that fails, one that panics, and text that tries to run script.
func browserRun(t *testing.T) *transcript.Transcript {
	t.Helper()
	sleep := func(ctx context.Context, d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tools := []toolrun.Tool{
		toolrun.NewTool("fetch_page", "Fetches a page", func(ctx context.Context, in struct {
			URL string `json:"url"`
		}) (string, error) {
			return "<html>" + scriptPayload + imgPayload + "</html>", sleep(ctx, 40*time.Millisecond)
		}),
		toolrun.NewTool("search", "Searches", func(ctx context.Context, in struct {
			Q string `json:"q"`
		}) (string, error) {
			return "3 results for " + in.Q, sleep(ctx, 90*time.Millisecond)
		}),
		toolrun.NewTool("query_db", "Runs a query", func(ctx context.Context, in struct{}) (string, error) {
			sleep(ctx, 25*time.Millisecond)
			return "", errors.New("connection refused: " + imgPayload)
		}),
		toolrun.NewTool("parse", "Parses", func(ctx context.Context, in struct{}) (string, error) {
			var m map[string]int
			//lint:ignore SA5000 the tool panics on purpose
			m["x"] = 1
			return "", nil
		}),
	}
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("I'll look around. "+scriptPayload),
			toolruntest.ToolUse("toolu_01", "search", map[string]string{"q": "weather " + scriptPayload}),
			toolruntest.ToolUse("toolu_02", "fetch_page", map[string]string{"url": "https://example.com"}),
			toolruntest.ToolUse("toolu_03", "query_db", nil),
		),
		toolruntest.Message(toolruntest.Text("One more."), toolruntest.ToolUse("toolu_04", "parse", nil), toolruntest.ToolUse("toolu_05", "search", map[string]string{"q": "again"})),
		toolruntest.Message(toolruntest.Text("Done. "+imgPayload)),
	))
	var buf syncBuffer
	rec := transcript.NewRecorder(&buf, &transcript.RecorderOptions{Meta: map[string]string{"name": "browser test"}})
	if _, err := toolrun.New(client(s), userParams("Find things. "+scriptPayload), tools, &toolrun.Options{Logger: discard(), OnEvent: rec.Observe}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	return readBytes(t, buf.Bytes())
}

var titleRE = regexp.MustCompile(`<title>([^<]*)</title>`)

// TestReportInChromium loads the report in headless Chromium: the timeline
// is there, the text that tries to run script runs nothing, and a
// screenshot is taken.
func TestReportInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()

	// First, that this harness sees script run when it does: a page whose
	// script does what the payloads would.
	control := filepath.Join(dir, "control.html")
	if err := os.WriteFile(control, []byte(`<!DOCTYPE html><html><head><title>control</title></head><body>`+
		scriptPayload+`<script>document.body.dataset.pwned=1</script></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(runChromium(t, bin, "--dump-dom", "file://"+control))
	if !strings.Contains(dom, `data-pwned="1"`) || !strings.Contains(dom, "<title>pwned</title>") {
		t.Fatalf("the control page's script did not run in chromium, so the test could not see an attack succeed:\n%s", dom)
	}

	tr := browserRun(t)
	report := filepath.Join(dir, "report.html")
	var page bytes.Buffer
	if err := transcript.WriteHTML(&page, tr); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(report, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	wantTitle := titleRE.FindStringSubmatch(page.String())[1]

	dom = string(runChromium(t, bin, "--dump-dom", "file://"+report))
	tests := []struct {
		name string
		re   string
		want int
	}{
		{"timeline", `id="timeline"`, 1},
		{"a bar per tool call", `class="tool-bar `, 5},
		{"a bar per model request", `class="model-bar"`, 3},
		{"failed calls", `class="tool-bar failed"`, 2},
		{"token chart bars", `<rect class="(in|out)"`, 6},
		{"no dataset set by the img payload", `data-pwned`, 0},
		{"no script element", `<script`, 0},
		{"no img element", `<img`, 0},
		{"the script payload, shown as text", regexp.QuoteMeta(`&lt;script&gt;document.title='pwned'&lt;/script&gt;`), 1},
		{"the img payload, shown as text", regexp.QuoteMeta(`&lt;img src=x onerror="document.body.dataset.pwned=1"&gt;`), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := len(regexp.MustCompile(tt.re).FindAllStringIndex(dom, -1))
			if tt.want == 1 && got >= 1 { // the payloads show in several places
				return
			}
			if got != tt.want {
				t.Errorf("%d matches of %s in the loaded page, want %d", got, tt.re, tt.want)
			}
		})
	}
	if m := titleRE.FindStringSubmatch(dom); m == nil || m[1] != wantTitle {
		t.Errorf("the loaded page's title is %q, want %q", m, wantTitle)
	}

	shot := filepath.Join(screenshotDir(t), "report.png")
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1280,900", "--hide-scrollbars", "file://"+report)
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 20<<10 {
		t.Errorf("the screenshot is %d bytes, want a PNG of at least 20 KiB", len(b))
	}
	t.Logf("screenshot: %s, %d bytes", shot, len(b))
}

// TestReportImagesInChromium records a run whose tool returns an image,
// and checks in headless Chromium that the report shows it inline: the
// page's screenshot holds the image's colour.
func TestReportImagesInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	var png bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 240, 160))
	draw.Draw(img, img.Bounds(), &image.Uniform{C: color.RGBA{R: 0xd0, G: 0x10, B: 0xc0, A: 0xff}}, image.Point{}, draw.Src)
	if err := pngenc.Encode(&png, img); err != nil {
		t.Fatal(err)
	}
	chart := toolrun.NewTool("chart", "Draws a chart", func(ctx context.Context, in struct{}) ([]toolrun.Content, error) {
		return []toolrun.Content{toolrun.Text("the chart:"), toolrun.Image("image/png", png.Bytes())}, nil
	})
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_01", "chart", nil)),
		toolruntest.Message(toolruntest.Text("Here is the chart.")),
	))
	var buf syncBuffer
	rec := transcript.NewRecorder(&buf, nil)
	if _, err := toolrun.New(client(s), userParams("Draw it."), []toolrun.Tool{chart}, &toolrun.Options{Logger: discard(), OnEvent: rec.Observe}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := transcript.WriteHTML(&page, readBytes(t, buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.html")
	if err := os.WriteFile(report, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(runChromium(t, bin, "--dump-dom", "file://"+report))
	if got := strings.Count(dom, `<img class="result-image" src="data:image/png;base64,`); got < 1 {
		t.Fatalf("%d inline images in the loaded page, want at least 1", got)
	}

	shot := filepath.Join(screenshotDir(t), "report-images.png")
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1280,2400", "--hide-scrollbars", "file://"+report)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	got, err := pngenc.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for y := got.Bounds().Min.Y; y < got.Bounds().Max.Y; y++ {
		for x := got.Bounds().Min.X; x < got.Bounds().Max.X; x++ {
			r, g, b, _ := got.At(x, y).RGBA()
			if r>>8 == 0xd0 && g>>8 == 0x10 && b>>8 == 0xc0 {
				n++
			}
		}
	}
	// The image is 240×160; most of it is on the screen, whatever the
	// scaling.
	if n < 240*160/2 {
		t.Errorf("%d pixels of the image's colour in the screenshot, want at least %d: the image is not shown", n, 240*160/2)
	}
}
