//go:build ignore

// holdput is a reverse proxy for run.sh: it passes every request to the
// bucket's endpoint unchanged, except that PUTs wait while the proxy is
// holding. The benchmark measures the server's front (receive, store,
// queue) apart from its uploads: it holds the PUTs during the window, so
// the upload workers stand still, and lets them go after, to measure the
// uploads alone while the queue drains. HEADs and GETs (FindMissingBlobs'
// and GetActionResult's lookups) are never held: they are the front's.
//
//	go run holdput.go -listen 127.0.0.1:19002 -to http://127.0.0.1:19000 -control 127.0.0.1:19003
//
// POST /hold and POST /release on the control address switch it; it
// starts holding. Loopback only.
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:19002", "address for the bucket's clients")
	to := flag.String("to", "http://127.0.0.1:19000", "the bucket's endpoint")
	control := flag.String("control", "127.0.0.1:19003", "address for POST /hold and POST /release")
	flag.Parse()
	target, err := url.Parse(*to)
	if err != nil {
		log.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		// The request's Host header is kept: the client signed it.
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 256},
	}
	var mu sync.Mutex
	released := make(chan struct{}) // closed while not holding
	gate := func() <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		return released
	}
	ctl := http.NewServeMux()
	ctl.HandleFunc("POST /hold", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-released:
			released = make(chan struct{})
		default:
		}
	})
	ctl.HandleFunc("POST /release", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-released:
		default:
			close(released)
		}
	})
	go func() { log.Fatal(http.ListenAndServe(*control, ctl)) }()
	log.Fatal(http.ListenAndServe(*listen, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			select {
			case <-gate():
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	})))
}
