package objstore

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults applies a backend Config's defaults: 0 means a 30s
// RequestTimeout and a Concurrency of 16; a negative one is an error.
func Defaults(requestTimeout time.Duration, concurrency int) (time.Duration, int, error) {
	if requestTimeout < 0 || concurrency < 0 {
		return 0, 0, fmt.Errorf("negative RequestTimeout (%v) or Concurrency (%d)", requestTimeout, concurrency)
	}
	if requestTimeout == 0 {
		requestTimeout = 30 * time.Second
	}
	if concurrency == 0 {
		concurrency = 16
	}
	return requestTimeout, concurrency, nil
}

// NewTransport is the HTTP transport of a backend's client: connecting
// and waiting for an answer's headers bounded by requestTimeout, and the
// connections to the store bounded: concurrency kept idle for reuse (a
// Stat's or Put's requests run that many at a time), four times as many
// at most (the tier's fills beside them). A client sends through
// StallGuard over it.
func NewTransport(requestTimeout time.Duration, concurrency int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: requestTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   requestTimeout,
		ResponseHeaderTimeout: requestTimeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   concurrency,
		MaxConnsPerHost:       4 * concurrency,
		IdleConnTimeout:       90 * time.Second,
	}
}

// Endpoint parses a backend URL's query, whose one parameter is
// endpoint=URL (an http or https URL with a host, and no user
// information, query or fragment, where a credential would be), and
// returns that URL without a trailing "/", or "". accepted lists the
// parameters for the error that names an unknown one.
func Endpoint(rawQuery, accepted string) (string, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", fmt.Errorf("parameters: %v", err)
	}
	endpoint := ""
	for name, vs := range q {
		if name != "endpoint" {
			// A credential's parameters (a SAS token's sig=) land here:
			// name it, never echo its value.
			return "", fmt.Errorf("unknown parameter %q (accepted: %s)", Clip(name), accepted)
		}
		if len(vs) != 1 || vs[0] == "" {
			return "", fmt.Errorf("parameter %q must be given once, with a value", name)
		}
		e, err := url.Parse(vs[0])
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil || e.RawQuery != "" || e.ForceQuery || e.Fragment != "" {
			return "", fmt.Errorf("endpoint %q is not an http:// or https:// URL with a host and no credentials, query or fragment", ShowParameter(vs[0]))
		}
		endpoint = strings.TrimSuffix(vs[0], "/")
	}
	return endpoint, nil
}
