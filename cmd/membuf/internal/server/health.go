package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/cas/reapi"
)

// healthService is grpc.health.v1.Health for `membuf serve`: SERVING for
// the server as a whole ("") and for each service it registers once the
// store is open and the services are up; NOT_SERVING from the moment a stop
// begins, while open RPCs drain. Load balancers and Kubernetes probes ask
// it (Check) or follow it (Watch); /healthz on the HTTP listener answers
// the same for probes that speak HTTP only. It needs no credentials.
//
// grpc-go's health.Server would do, but its Watch streams run until their
// clients end them, and a graceful stop waits for every open stream: each
// stop would wait out the shutdown timeout for any watcher. Here a stop
// sends watchers NOT_SERVING and ends their streams.
type healthService struct {
	healthgrpc.UnimplementedHealthServer

	mu       sync.Mutex
	services []string // the names it answers for; "" is the whole server
	serving  bool
	draining bool
	changed  chan struct{} // closed, and replaced, at every change
}

func newHealthService() *healthService {
	return &healthService{services: []string{""}, changed: make(chan struct{})}
}

// register registers the service on g and answers for every service g has
// registered so far (call it last).
func (h *healthService) register(g *grpc.Server) {
	healthgrpc.RegisterHealthServer(reapi.MalformedIsInvalidArgument(g), h) // a Check that does not parse is INVALID_ARGUMENT, as on the cache's services
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range g.GetServiceInfo() {
		if !slices.Contains(h.services, name) {
			h.services = append(h.services, name)
		}
	}
	slices.Sort(h.services)
}

// setServing reports the server SERVING.
func (h *healthService) setServing() { h.set(true, false) }

// drain reports the server NOT_SERVING from now on, and ends Watch streams
// once they have said so.
func (h *healthService) drain() { h.set(false, true) }

func (h *healthService) set(serving, draining bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.serving, h.draining = serving, draining
	close(h.changed)
	h.changed = make(chan struct{})
}

// status returns what Check says for service, whether it is known, whether
// the server is draining, and the channel closed at the next change.
func (h *healthService) status(service string) (healthgrpc.HealthCheckResponse_ServingStatus, bool, bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, known := slices.BinarySearch(h.services, service); !known {
		return healthgrpc.HealthCheckResponse_SERVICE_UNKNOWN, false, h.draining, h.changed
	}
	if h.serving {
		return healthgrpc.HealthCheckResponse_SERVING, true, h.draining, h.changed
	}
	return healthgrpc.HealthCheckResponse_NOT_SERVING, true, h.draining, h.changed
}

// Check answers for one service; an unknown one is NOT_FOUND, as the
// protocol says.
func (h *healthService) Check(_ context.Context, req *healthgrpc.HealthCheckRequest) (*healthgrpc.HealthCheckResponse, error) {
	st, known, _, _ := h.status(req.Service)
	if !known {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", req.Service)
	}
	return &healthgrpc.HealthCheckResponse{Status: st}, nil
}

// List answers for every service.
func (h *healthService) List(context.Context, *healthgrpc.HealthListRequest) (*healthgrpc.HealthListResponse, error) {
	h.mu.Lock()
	names := slices.Clone(h.services)
	h.mu.Unlock()
	resp := &healthgrpc.HealthListResponse{Statuses: make(map[string]*healthgrpc.HealthCheckResponse, len(names))}
	for _, n := range names {
		st, _, _, _ := h.status(n)
		resp.Statuses[n] = &healthgrpc.HealthCheckResponse{Status: st}
	}
	return resp, nil
}

// Watch sends the service's status, then every change, until the client
// goes away or the server drains: then it sends the last status
// (NOT_SERVING) and ends the stream.
func (h *healthService) Watch(req *healthgrpc.HealthCheckRequest, stream healthgrpc.Health_WatchServer) error {
	var last healthgrpc.HealthCheckResponse_ServingStatus = -1
	for {
		st, _, draining, changed := h.status(req.Service)
		if st != last {
			if err := stream.Send(&healthgrpc.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		if draining {
			return nil
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		}
	}
}

// ServeHTTP is /healthz: 200 "SERVING" or 503 "NOT_SERVING".
func (h *healthService) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	st, _, _, _ := h.status("")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if st != healthgrpc.HealthCheckResponse_SERVING {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, st)
}
