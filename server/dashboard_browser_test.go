package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	qt "github.com/frankban/quicktest"
)

// chromium finds the browser (Debian's chromium package, which scripts/test.sh installs).
// Without one the browser tests are skipped, except in CI, where they fail.
func chromium(t *testing.T) string {
	for _, p := range []string{os.Getenv("INBOXD_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: scripts/test.sh installs Debian's chromium package")
	}
	t.Skip("chromium is not installed (scripts/test.sh installs it)")
	return ""
}

// newChrome starts a headless Chromium (the launch flags of this project's machines) with a
// fresh profile and a window of the given size; it is stopped when the test ends.
func newChrome(t *testing.T, width, height int64) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(int(width), int(height)),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	mobile := func(p1 *emulation.SetDeviceMetricsOverrideParams, p2 *emulation.SetTouchEmulationEnabledParams) {
		p1.Mobile = width < 600
		p2.Enabled = width < 600
	}
	qt.Assert(t, chromedp.Do(ctx, chromedp.EmulateViewport(width, height, chromedp.EmulateScale(2), mobile)), qt.IsNil)
	return ctx
}

// itemLink is the link of the queue item whose text contains s.
func itemLink(s string) chromedp.Search {
	return chromedp.Search(`//article[contains(., "` + s + `")]//a`)
}

// TestDashboardInBrowser is a person's review on a phone: log in, find the held spam,
// release it (the API then shows it released, received and unread), and fail to release
// the one with the EICAR attachment.
func TestDashboardInBrowser(t *testing.T) {
	c := qt.New(t)
	chromium(t)
	d := newDashEnv(t)
	spam := d.receive(spamMail("prize@sender.example"))
	virus := d.receive(eicarMail("invoice@sender.example"))
	ctx := newChrome(t, 412, 915)

	err := chromedp.Do(ctx,
		chromedp.Navigate(d.url+"/dashboard/"),
		chromedp.WaitVisible(chromedp.ID("password")),
		chromedp.SendKeys(chromedp.ID("password"), operatorPassword),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS("section.queue")),
		chromedp.Click(itemLink("WINNER")),
		chromedp.WaitVisible(chromedp.ID("release")),
	)
	c.Assert(err, qt.IsNil)
	status, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("status")))
	c.Assert(err, qt.IsNil)
	c.Assert(status, qt.Equals, "quarantined")
	rules, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("spam-rules")))
	c.Assert(err, qt.IsNil)
	c.Assert(rules, qt.Contains, "SPAM_PHRASES_MANY")

	// Usable on a phone: nothing is wider than the screen.
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	c.Assert(err, qt.IsNil)
	c.Assert(overflow, qt.IsFalse)

	if out := os.Getenv("INBOXD_SCREENSHOT"); out != "" {
		screenshotReview(t, d, out)
	}

	c.Assert(chromedp.Do(ctx, chromedp.Click(chromedp.ID("release")), chromedp.WaitVisible(chromedp.ID("flash"))), qt.IsNil)
	flash, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("flash")))
	c.Assert(err, qt.IsNil)
	c.Assert(flash, qt.Contains, "Released")

	m := d.ok("getMessage", "GET", msgPath(d.inbox, spam), d.full, nil)
	c.Assert(m["protection"].(map[string]any)["status"], qt.Equals, "released")
	c.Assert(m["protection"].(map[string]any)["releasedBy"], qt.Equals, "admin")
	c.Assert(m["labels"], qt.DeepEquals, []any{"received", "unread"})

	// The EICAR message: Release is disabled, and a release forced past the page is refused.
	c.Assert(chromedp.Do(ctx, chromedp.Click(itemLink("Invoice attached")), chromedp.WaitVisible(chromedp.ID("blocked"))), qt.IsNil)
	blocked, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("blocked")))
	c.Assert(err, qt.IsNil)
	c.Assert(blocked, qt.Contains, "cannot be released")
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#release').disabled`))
	c.Assert(err, qt.IsNil)
	c.Assert(disabled, qt.IsTrue)
	err = chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#release').disabled = false`),
		chromedp.Click(chromedp.ID("release")),
		chromedp.WaitVisible(chromedp.ID("error-code")),
	)
	c.Assert(err, qt.IsNil)
	code, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("error-code")))
	c.Assert(err, qt.IsNil)
	c.Assert(code, qt.Equals, "malware_blocked")
	m = d.ok("getMessage", "GET", msgPath(d.inbox, virus), d.full, nil)
	c.Assert(m["protection"].(map[string]any)["status"], qt.Equals, "quarantined")
	c.Assert(m["labels"], qt.DeepEquals, []any{"quarantined"})
}

// screenshotReview saves the review page of a held message at desktop width: the picture
// in docs/protection.md (INBOXD_SCREENSHOT=docs/dashboard-review.png go test -run InBrowser ./server).
func screenshotReview(t *testing.T, d *dashEnv, out string) {
	ctx := newChrome(t, 1000, 1400)
	err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1000, 1400, chromedp.EmulateScale(1)),
		chromedp.Navigate(d.url+"/dashboard/login"),
		chromedp.WaitVisible(chromedp.ID("password")),
		chromedp.SendKeys(chromedp.ID("password"), operatorPassword),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS("section.queue")),
		chromedp.Click(itemLink("WINNER")),
		chromedp.WaitVisible(chromedp.ID("release")),
	)
	qt.Assert(t, err, qt.IsNil)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	qt.Assert(t, err, qt.IsNil)
	if !filepath.IsAbs(out) {
		out = filepath.Join("..", out) // relative to the repository root
	}
	qt.Assert(t, os.WriteFile(out, png, 0o644), qt.IsNil)
	t.Logf("screenshot written to %s", out)
}
