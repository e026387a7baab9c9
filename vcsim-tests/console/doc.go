// Package console holds the web console's browser tests: TestMain builds the
// appliance once and runs `appliance demo` (the lab, a repository, a job and
// a first backup); each test drives headless Chromium through
// internal/browsertest against it. It has no non-test code but this comment.
package console
