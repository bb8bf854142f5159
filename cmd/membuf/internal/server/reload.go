package server

import (
	"log/slog"

	"github.com/membuf/membuf/cas/access"
)

// reloadOnSIGHUP loads the TLS material (certs, if not nil) and the
// htpasswd file (if access has one) again. A file that fails to load leaves
// what is in force, and the log says why; a server with neither logs that
// there was nothing to reload.
func reloadOnSIGHUP(certs *certReloader, access *access.Control, log *slog.Logger) {
	if certs == nil && (access == nil || access.Users == nil) {
		log.Info("SIGHUP: nothing to reload (no --tls-cert, no --htpasswd); still serving")
		return
	}
	if certs != nil {
		certs.reload("SIGHUP")
	}
	if access != nil && access.Users != nil {
		if err := access.Users.Reload(); err != nil {
			log.Warn("htpasswd not reloaded; the previous users stay in force", "err", err)
		} else {
			log.Info("htpasswd reloaded", "users", access.Users.Users())
		}
	}
}
