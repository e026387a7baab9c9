package console

import (
	"fmt"
	"testing"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// signedIn returns a browser on the dashboard with the administrator's
// session that TestMain opened (logins are rate-limited; only the login
// tests log in through the form).
func signedIn(t *testing.T) *browsertest.Browser {
	t.Helper()
	b := browsertest.New(t, demo.URL)
	b.SetCookie("vmvault_session", demo.session, true)
	b.SetCookie("vmvault_csrf", demo.csrf, false)
	b.Go("/#/dashboard")
	b.WaitJS(`!document.getElementById("user").hidden && !!document.getElementById("page-title")`, "the signed-in console")
	return b
}

// apiJS is a JavaScript expression calling the API from the page with the
// console's session (CSRF from the cookie); it resolves to the JSON answer.
func apiJS(method, path, body string) string {
	if body == "" {
		body = "undefined"
	}
	return fmt.Sprintf(`(async () => {
		const csrf = (document.cookie.split("; ").find(c => c.startsWith("vmvault_csrf=")) || "").split("=")[1] || "";
		const r = await fetch(%q, {method: %q, headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf}, body: %s});
		const text = await r.text();
		return {status: r.status, body: text ? JSON.parse(text) : null};
	})()`, "/api/v1"+path, method, body)
}

type apiAnswer[T any] struct {
	Status int `json:"status"`
	Body   T   `json:"body"`
}

// pageTitle waits for the route's h1.
func pageTitle(t *testing.T, b *browsertest.Browser, title string) {
	t.Helper()
	b.WaitText("#page-title", title)
}
