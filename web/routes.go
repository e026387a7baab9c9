package web

import "github.com/vmvault/vmvault/internal/auth"

// table is the route table: every route, the role it needs ("" = public).
func (s *Server) table() []route {
	const (
		pub = auth.Role("")
		ro  = auth.RoleRestoreOnly
		op  = auth.RoleOperator
		adm = auth.RoleAdministrator
	)
	return []route{
		{"GET", "/healthz", pub, s.healthz},
		{"GET", "/metrics", ro, s.serveMetrics},
		{"GET", "/api/v1/openapi.json", pub, s.openapi},

		{"POST", "/api/v1/auth/login", pub, s.login},
		{"POST", "/api/v1/auth/logout", ro, s.logout},
		{"GET", "/api/v1/auth/me", ro, s.me},
		{"GET", "/api/v1/auth/tokens", adm, s.listTokens},
		{"POST", "/api/v1/auth/tokens", adm, s.createToken},
		{"DELETE", "/api/v1/auth/tokens/:id", adm, s.deleteToken},

		{"GET", "/api/v1/users", adm, s.listUsers},
		{"POST", "/api/v1/users", adm, s.createUser},
		{"PUT", "/api/v1/users/:name", adm, s.updateUser},
		{"DELETE", "/api/v1/users/:name", adm, s.deleteUser},

		{"GET", "/api/v1/jobs", ro, s.listJobs},
		{"POST", "/api/v1/jobs", adm, s.createJob},
		{"GET", "/api/v1/jobs/:id", ro, s.getJob},
		{"PUT", "/api/v1/jobs/:id", adm, s.putJob},
		{"DELETE", "/api/v1/jobs/:id", adm, s.deleteJob},
		{"GET", "/api/v1/jobs/:id/retention-preview", ro, s.retentionPreview},
		{"POST", "/api/v1/jobs/:id/run", op, s.runJob},
		{"GET", "/api/v1/jobs/:id/runs", ro, s.jobRuns},
		{"POST", "/api/v1/retention-preview", ro, s.retentionPreviewUnsaved},

		{"GET", "/api/v1/copy-jobs", ro, s.listCopyJobs},
		{"POST", "/api/v1/copy-jobs", adm, s.createCopyJob},
		{"GET", "/api/v1/copy-jobs/:id", ro, s.getCopyJob},
		{"PUT", "/api/v1/copy-jobs/:id", adm, s.putCopyJob},
		{"DELETE", "/api/v1/copy-jobs/:id", adm, s.deleteCopyJob},
		{"POST", "/api/v1/copy-jobs/:id/run", op, s.runCopyJob},
		{"GET", "/api/v1/copy-jobs/:id/runs", ro, s.copyJobRuns},

		{"GET", "/api/v1/restore-points", ro, s.listPoints},
		{"GET", "/api/v1/restore-points/:id", ro, s.getPoint},
		{"POST", "/api/v1/restore-points/:id/lock", op, s.lockPoint},
		{"POST", "/api/v1/restore-points/:id/unlock", op, s.unlockPoint},
		{"DELETE", "/api/v1/restore-points/:id", adm, s.deletePoint},
		{"GET", "/api/v1/restore-points/:id/volumes", ro, s.listVolumes},
		{"GET", "/api/v1/restore-points/:id/volumes/:vol/files", ro, s.listFiles},
		{"GET", "/api/v1/restore-points/:id/volumes/:vol/content", ro, s.getContent},
		{"GET", "/api/v1/files/search", ro, s.searchFiles},

		{"GET", "/api/v1/repositories", ro, s.listRepositories},
		{"POST", "/api/v1/repositories", adm, s.addRepository},
		{"GET", "/api/v1/repositories/:id", ro, s.getRepository},
		{"DELETE", "/api/v1/repositories/:id", adm, s.removeRepository},
		{"GET", "/api/v1/repositories/:id/usage", ro, s.repositoryUsage},
		{"POST", "/api/v1/repositories/:id/check", op, s.checkRepository},
		{"POST", "/api/v1/repositories/:id/reclaim", op, s.reclaimRepository},

		{"GET", "/api/v1/approvals", ro, s.listApprovals},
		{"POST", "/api/v1/approvals/:id/approve", adm, s.approveAction},
		{"POST", "/api/v1/approvals/:id/cancel", adm, s.cancelAction},

		{"GET", "/api/v1/tasks", ro, s.listTasks},
		{"GET", "/api/v1/tasks/:id", ro, s.getTask},
		{"GET", "/api/v1/tasks/:id/events", ro, s.taskEvents},
		{"POST", "/api/v1/tasks/:id/cancel", op, s.cancelTask},

		{"GET", "/api/v1/events", ro, s.listEvents},
		{"GET", "/api/v1/events/export", ro, s.exportEvents},
		{"GET", "/api/v1/stream", ro, s.stream},
		{"GET", "/api/v1/dashboard", ro, s.dashboard},
		{"GET", "/api/v1/vms", ro, s.listVMs},
		{"GET", "/api/v1/inventory", ro, s.inventoryTree},
		{"GET", "/api/v1/tags", ro, s.listTags},
		{"GET", "/api/v1/restore-targets", ro, s.restoreTargets},
		{"GET", "/api/v1/settings", ro, s.getSettings},
		{"PUT", "/api/v1/settings", adm, s.putSettings},
		{"POST", "/api/v1/settings/vcenter/test", adm, s.testVCenter},
		{"POST", "/api/v1/settings/smtp/test", adm, s.testSMTP},
		{"PUT", "/api/v1/settings/vcenter", adm, s.putVCenterSettings},
		{"PUT", "/api/v1/settings/smtp", adm, s.putSMTPSettings},
		{"PUT", "/api/v1/settings/maintenance", adm, s.putMaintenanceSettings},
		{"DELETE", "/api/v1/settings/:section", adm, s.resetSettings},

		{"POST", "/api/v1/backups", op, s.startBackup},
		{"POST", "/api/v1/restores", ro, s.startRestore},
		{"POST", "/api/v1/restores/disk", ro, s.startDiskRestore},
	}
}
