// Package browsertest drives a real headless Chromium for tests (Debian's
// chromium, which ./scripts/test installs when missing), through
// chromedp. Tests that need a browser fail without one rather than skip:
// a page nobody drove in a browser is not tested. Screenshots go outside
// the repository, under the user's cache (or $OPSMCP_ARTIFACTS).
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium finds the browser: $OPSMCP_CHROMIUM, chromium or
// chromium-browser on the PATH.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{os.Getenv("OPSMCP_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: install Debian's chromium (./scripts/test does), or set OPSMCP_CHROMIUM")
	return ""
}

// Artifacts is the folder screenshots of the suite named sub go to.
func Artifacts(t testing.TB, sub string) string {
	t.Helper()
	dir := os.Getenv("OPSMCP_ARTIFACTS")
	if dir == "" {
		home, _ := os.UserCacheDir()
		dir = filepath.Join(home, "opsmcp", "artifacts")
	}
	dir = filepath.Join(dir, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// New returns a function starting headless Chromiums, each with a fresh
// profile (its own cookies), stopped when the test ends. Each context
// ends shortly before the test binary's deadline (go test -timeout), so
// a page that never shows what a step waits for fails that step, naming
// it, rather than the whole binary; there is no guess at how fast the
// machine is.
func New(t testing.TB) func() context.Context {
	t.Helper()
	exe := Chromium(t)
	return func() context.Context {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(exe),
			chromedp.Flag("headless", true),
			chromedp.Flag("no-sandbox", true),
			chromedp.Flag("disable-gpu", true),
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.UserDataDir(t.TempDir()),
			chromedp.WindowSize(windowWidth, windowHeight),
		)
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		t.Cleanup(cancelAlloc)
		ctx, cancel := chromedp.NewContext(alloc)
		t.Cleanup(cancel)
		if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
			if end, ok := d.Deadline(); ok {
				left := time.Until(end)
				ctx, cancel = context.WithDeadline(ctx, end.Add(-min(left/10, 10*time.Second)))
				t.Cleanup(cancel)
			}
		}
		return ctx
	}
}

// The browser window's size.
const windowWidth, windowHeight = 1440, 900

// Do runs steps, failing the test with what on error.
func Do(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Value runs an action that returns something.
func Value[T any](t testing.TB, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// Until waits for a JavaScript condition to hold.
func Until(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[chromedp.Void](expr)(ctx, tg)
		return chromedp.Void{}, err
	}
}

// CSS is a CSS selector.
func CSS(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// Screenshot saves the whole page as sub/name.png under Artifacts and
// returns the file's path.
func Screenshot(t testing.TB, ctx context.Context, sub, name string) string {
	t.Helper()
	png := Value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(Artifacts(t, sub), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// ScreenshotWidths saves the whole page as it lays out at each width
// (a phone's 390 px, a desktop's 1400 px), as sub/name-<width>.png,
// then lays it out at the window's width again.
func ScreenshotWidths(t testing.TB, ctx context.Context, sub, name string, widths ...int64) {
	t.Helper()
	for _, w := range widths {
		// A frame to lay out at the new width before the shot.
		Do(t, ctx, fmt.Sprintf("lay out at %d px", w), chromedp.EmulateViewport(w, 900), Until(`new Promise(r => requestAnimationFrame(() => r(true)))`))
		Screenshot(t, ctx, sub, fmt.Sprintf("%s-%d", name, w))
	}
	Do(t, ctx, "lay out at the window's width", chromedp.EmulateViewport(windowWidth, windowHeight))
}
