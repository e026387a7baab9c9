// Package browsertest drives Debian's headless Chromium (through chromedp) for
// the web console's tests: one fresh browser per Browser, with its own
// profile in t.TempDir(). It fails the test on any console error or uncaught
// JavaScript exception, and on failure saves a full-page screenshot of every
// page the test visited to $VMVAULT_ARTIFACTS (default
// <repo>/.artifacts/browser/<TestName>/).
//
// It is test support only: it imports nothing of vmvault's and nothing but
// test code may import it.
package browsertest
