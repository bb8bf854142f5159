package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// TestServeHealth: SERVING for the server and each service once serve is
// up, NOT_FOUND for a service it does not have; on stop, NOT_SERVING
// (Check, Watch, /healthz) for --drain-delay while RPCs are still served,
// and a Watch stream ends instead of holding the graceful stop.
func TestServeHealth(t *testing.T) {
	s := startServe(t, "--drain-delay", "3s", "--shutdown-timeout", "60s")
	conn := dial(t, s.grpcAddr)
	health := healthgrpc.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for _, svc := range []string{"", "google.bytestream.ByteStream", "build.bazel.remote.execution.v2.ContentAddressableStorage",
		"build.bazel.remote.execution.v2.ActionCache", "build.bazel.remote.execution.v2.Capabilities"} {
		resp, err := health.Check(ctx, &healthgrpc.HealthCheckRequest{Service: svc})
		if err != nil || resp.Status != healthgrpc.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, %v; want SERVING", svc, resp, err)
		}
	}
	if _, err := health.Check(ctx, &healthgrpc.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check of an unknown service: %v; want NOT_FOUND", err)
	}
	watch, err := health.Watch(ctx, &healthgrpc.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := watch.Recv(); err != nil || first.Status != healthgrpc.HealthCheckResponse_SERVING {
		t.Fatalf("Watch's first message: %v, %v; want SERVING", first, err)
	}

	stopped := make(chan int, 1)
	start := time.Now()
	go func() {
		code, _, _ := s.stop()
		stopped <- code
	}()
	if next, err := watch.Recv(); err != nil || next.Status != healthgrpc.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after the stop began: %v, %v; want NOT_SERVING", next, err)
	}
	if _, err := watch.Recv(); err != io.EOF {
		t.Errorf("Watch after NOT_SERVING: %v; want the stream ended (EOF)", err)
	}
	// Still serving RPCs while draining, and saying NOT_SERVING.
	resp, err := health.Check(ctx, &healthgrpc.HealthCheckRequest{})
	if err != nil || resp.Status != healthgrpc.HealthCheckResponse_NOT_SERVING {
		t.Errorf("Check while draining: %v, %v; want NOT_SERVING", resp, err)
	}
	r, err := http.Get("http://" + s.httpAddr + "/healthz")
	if err != nil {
		t.Fatalf("/healthz while draining: %v", err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable || string(body) != "NOT_SERVING\n" {
		t.Errorf("/healthz while draining: %s %q; want 503 NOT_SERVING", r.Status, body)
	}
	if code := <-stopped; code != 0 {
		t.Errorf("serve exited %d", code)
	}
	// The Watch stream ended, so the graceful stop did not wait out the
	// 60 s shutdown timeout for it.
	if d := time.Since(start); d > 40*time.Second {
		t.Errorf("stop took %v with a Watch stream open; want the drain delay and little more", d)
	}
}

// TestServeReflection: gRPC reflection lists the services with
// --reflection, and is not there without it.
func TestServeReflection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := func(addr string) (string, error) {
		stream, err := reflectionpb.NewServerReflectionClient(dial(t, addr)).ServerReflectionInfo(ctx)
		if err != nil {
			return "", err
		}
		// Send's io.EOF means the server has ended the stream already
		// (UNIMPLEMENTED, without reflection): Recv says how.
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && err != io.EOF {
			return "", err
		}
		resp, err := stream.Recv()
		if err != nil {
			return "", err
		}
		var names []string
		for _, svc := range resp.GetListServicesResponse().GetService() {
			names = append(names, svc.Name)
		}
		return strings.Join(names, " "), nil
	}
	on := startServe(t, "--reflection")
	names, err := list(on.grpcAddr)
	if err != nil || !strings.Contains(names, "google.bytestream.ByteStream") || !strings.Contains(names, "grpc.health.v1.Health") {
		t.Errorf("with --reflection: services %q, %v", names, err)
	}
	off := startServe(t)
	if _, err := list(off.grpcAddr); status.Code(err) != codes.Unimplemented {
		t.Errorf("without --reflection: %v; want UNIMPLEMENTED", err)
	}
}

// TestServePprofIsOptIn: without --pprof, /debug/pprof/ is not served.
func TestServePprofIsOptIn(t *testing.T) {
	s := startServe(t)
	r, err := http.Get("http://" + s.httpAddr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without --pprof: %s; want 404", r.Status)
	}
}
