package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// apiSession is the demo's own API session (the same API the console uses).
type apiSession struct {
	base string
	hc   *http.Client
	csrf string
}

func (a *apiSession) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.csrf != "" {
		req.Header.Set("X-CSRF-Token", a.csrf)
	}
	res, err := a.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return res.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if res.StatusCode >= 300 {
		return res.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, res.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return res.StatusCode, nil
}

// setupJob logs in to the daemon's API, creates the demo job when it does
// not exist yet and runs it now, so the console opens with a backup under way.
func setupJob(ctx context.Context, addr, user, password string, samples []lab.Sample) error {
	jar, _ := cookiejar.New(nil)
	a := &apiSession{base: "http://" + addr, hc: &http.Client{Jar: jar, Timeout: time.Minute}}
	var login struct {
		CSRFToken string `json:"csrfToken"`
	}
	if code, err := a.call(ctx, "POST", "/api/v1/auth/login", map[string]string{"username": user, "password": password}, &login); err != nil {
		if code == http.StatusUnauthorized {
			return fmt.Errorf("log in as %s: the state directory keeps another administrator password (unset VMVAULT_ADMIN_PASSWORD or use a new --state): %w", user, err)
		}
		return fmt.Errorf("log in to the demo's API: %w", err)
	}
	a.csrf = login.CSRFToken
	defer a.call(context.WithoutCancel(ctx), "POST", "/api/v1/auth/logout", nil, nil) //nolint:errcheck // best effort

	code, err := a.call(ctx, "GET", "/api/v1/jobs/"+JobID, nil, nil)
	if code == http.StatusNotFound {
		if _, err := a.call(ctx, "POST", "/api/v1/jobs", jobBody(samples), nil); err != nil {
			return fmt.Errorf("create the demo job: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("read the demo job: %w", err)
	}
	// The window is open, so the scheduler may have started the job
	// already: a conflict is fine.
	if code, err := a.call(ctx, "POST", "/api/v1/jobs/"+JobID+"/run", nil, nil); err != nil && code != http.StatusConflict {
		return fmt.Errorf("run the demo job: %w", err)
	}
	return nil
}

// jobBody is the demo job as POST /jobs takes it: the sample VMs, every
// day around the clock.
func jobBody(samples []lab.Sample) map[string]any {
	uuids := make([]string, 0, len(samples))
	for _, s := range samples {
		uuids = append(uuids, s.InstanceUUID)
	}
	days := map[string][]string{}
	for d := time.Sunday; d <= time.Saturday; d++ {
		days[strings.ToLower(d.String())] = []string{"00:00-24:00"}
	}
	return map[string]any{
		"id": JobID, "name": "Demo VMs", "enabled": true, "repository": RepoName,
		"description": "Backs up the demo's sample VMs every day; the window is open around the clock.",
		"selection":   map[string]any{"vms": uuids},
		"window":      map[string]any{"location": "UTC", "days": days},
		"retention":   map[string]any{"last": 3, "daily": 7, "weekly": 4},
		"quiesce":     string(policy.QuiesceFileSystem), // falls back to crash-consistent
		"concurrency": 2,
	}
}
