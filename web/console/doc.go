// Package console owns vmvault's web console: the static files (one HTML
// page, ES modules, one style sheet) embedded with go:embed, and the
// http.Handler that serves them at "/" and "/assets/...".
//
// The console is a client of the public REST API only; it holds no data, so
// its files are served without authentication. Paths the console does not
// know are answered with index.html so that client routes survive a reload.
// console must never import anything of vmvault's: web mounts it, not the
// other way round.
package console
