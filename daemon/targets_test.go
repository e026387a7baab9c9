package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/web"
)

// The daemon wires them: with a vCenter, GET /inventory and
// /restore-targets answer from the lab and the connection test logs in;
// without one, they answer 503 and the test needs credentials.
func TestServeConsoleTargets(t *testing.T) {
	l := startTestLab(t)
	dir := t.TempDir()
	sd, _ := startLabDaemon(t, l, dir, "admin-secret-2", "", Options{})
	api, csrf := cookieLogin(t, sd.addr, "admin-secret-2")

	var inv web.InventoryResponse
	code, body := api.call("GET", "/api/v1/inventory", nil, nil)
	if err := json.Unmarshal(body, &inv); code != 200 || err != nil || len(inv.Nodes) < 10 {
		t.Fatalf("inventory: %d %s", code, body)
	}
	var rt web.RestoreTargets
	code, body = api.call("GET", "/api/v1/restore-targets", nil, nil)
	if err := json.Unmarshal(body, &rt); code != 200 || err != nil || len(rt.Datacenters) != 1 || len(rt.Datacenters[0].Datastores) == 0 {
		t.Fatalf("restore targets: %d %s", code, body)
	}
	var res web.VCenterTestResult
	code, body = api.call("POST", "/api/v1/settings/vcenter/test", nil, csrf)
	if err := json.Unmarshal(body, &res); code != 200 || err != nil || !res.OK {
		t.Fatalf("vCenter test: %d %s", code, body)
	}
	code, body = api.call("POST", "/api/v1/settings/vcenter/test", map[string]string{"url": "https://elsewhere.example.com", "username": "u"}, csrf)
	if code != 422 || !strings.Contains(string(body), `"field":"password"`) {
		t.Fatalf("configured password to another URL: %d %s", code, body)
	}

	// A console's live stream does not hold the daemon up at shutdown.
	req, _ := http.NewRequest("GET", api.base+"/api/v1/stream", nil)
	sres, err := api.hc.Do(req)
	if err != nil || sres.StatusCode != 200 {
		t.Fatalf("stream: %v %v", sres, err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = io.Copy(io.Discard, sres.Body)
		sres.Body.Close()
	}()
	start := time.Now()
	sd.cancel()
	select {
	case <-ended:
	case <-time.After(15 * time.Second):
		t.Fatal("the stream did not end at shutdown")
	}
	select {
	case err := <-sd.done:
		sd.done <- nil
		if err != nil {
			t.Fatalf("daemon: %v\n%s", err, sd.stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the daemon did not stop with a stream open")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown with a stream open took %s", d)
	}
}
