package access

// Identify returns who a request with credentials c comes from, as
// Authorize finds it, without deciding anything: an access log's
// "who". Credentials that do not check out are an error; a nil Control
// takes every caller as anonymous. Checked passwords are remembered
// (Htpasswd), so after the request's own Authorize this costs a hash and
// a map lookup.
func (a *Control) Identify(c Credentials) (Identity, error) {
	if a == nil {
		return Identity{}, nil
	}
	return a.identify(c)
}
