// Package topology owns the vSphere-backed services of the console's API
// that answer in web/api's types: the inventory tree and restore targets
// (web.Topology, GET /inventory and /restore-targets), the tag listing
// (web.TagSource and web.VMTagSource, GET /tags) and the vCenter
// connection test (web.VCenterTester, POST /settings/vcenter/test).
//
// It reads vCenter through vsphere (the inventory, vsphere.Connect) and
// service/inventory (the tags, from the same vAPI reading the scheduler
// selects by), and caches the slow reads with internal/cache for a few
// seconds so that many console tabs cost one vCenter read. It lives beside
// service/inventory rather than in it because it answers in web/api's
// DTOs, which service/inventory (the policy adapter) must not import. The
// daemon builds these services and wires them into web.Config; topology
// never imports web, the daemon or govmomi.
package topology
