package server

import (
	"log/slog"

	"github.com/membuf/membuf/cas/access"
)

// reloadOnSIGHUP loads the TLS material (certs, if not nil), the
// htpasswd file, the access file and the tokens' keys (if access has
// them) again. A file
// that fails to load leaves what is in force, and the log says why; a
// server with none logs that there was nothing to reload.
func reloadOnSIGHUP(certs *certReloader, access *access.Control, log *slog.Logger) {
	if certs == nil && (access == nil || access.Users == nil && access.Instances == nil && access.Tokens == nil) {
		log.Info("SIGHUP: nothing to reload (no --tls-cert, no --htpasswd, no --access-file); still serving")
		return
	}
	if access != nil && access.Instances != nil {
		if err := access.Instances.Reload(access.Users != nil || access.ClientCertificates || access.Tokens != nil); err != nil {
			log.Warn("access file not reloaded; the previous rules stay in force", "err", err)
		} else {
			log.Info("access file reloaded", "instances", access.Instances.Len())
		}
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
	if access != nil && access.Tokens != nil {
		if err := access.Tokens.Reload(); err != nil {
			log.Warn("tokens' keys not reloaded; the previous keys stay in force", "err", err)
		} else {
			log.Info("tokens' keys reloaded")
		}
	}
}
