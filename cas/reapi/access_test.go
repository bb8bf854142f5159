package reapi

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
	"github.com/membuf/membuf/internal/testpki"
)

func loadUsers(t testing.TB, users map[string]string) *access.Htpasswd {
	t.Helper()
	h, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, users))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// as returns ctx carrying user's basic-auth credentials ("" for none).
func as(ctx context.Context, user, password string) context.Context {
	if user == "" {
		return ctx
	}
	cred := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+cred)
}

// rpcCase is one RPC of the four services, as a function that calls it on
// e's server with ctx against an existing blob and action result (or, with
// missing, against ones that do not exist) and returns its status.
type rpcCase struct {
	name string
	op   access.Operation
	call func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error
}

type accessFixture struct {
	blob, tree, action cas.Digest
	data               []byte
}

func (f *accessFixture) pick(missing bool, d cas.Digest) cas.Digest {
	if missing {
		return cas.DigestOf([]byte("never stored " + d.Hash))
	}
	return d
}

// drain receives from a server stream until it ends, and returns its
// error (nil at a clean end).
func drain[T any](recv func() (T, error)) error {
	for {
		if _, err := recv(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

var rpcCases = []rpcCase{
	{"ByteStream.Read", access.ReadCAS, func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error {
		s, err := e.bs.Read(ctx, &bspb.ReadRequest{ResourceName: readName(f.pick(missing, f.blob))})
		if err != nil {
			return err
		}
		return drain(s.Recv)
	}},
	{"BatchReadBlobs", access.ReadCAS, func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error {
		_, err := e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{f.pick(missing, f.blob).Proto()}})
		return err
	}},
	{"FindMissingBlobs", access.ReadCAS, func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error {
		_, err := e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{f.pick(missing, f.blob).Proto()}})
		return err
	}},
	{"GetTree", access.ReadCAS, func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error {
		s, err := e.cas.GetTree(ctx, &repb.GetTreeRequest{RootDigest: f.pick(missing, f.tree).Proto()})
		if err != nil {
			return err
		}
		return drain(s.Recv)
	}},
	{"ByteStream.Write", access.WriteCAS, func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error {
		data := f.data
		if missing {
			data = append([]byte("fresh "), data...)
		}
		s, err := e.bs.Write(ctx)
		if err != nil {
			return err
		}
		s.Send(&bspb.WriteRequest{ResourceName: writeName("acl", cas.DigestOf(data)), Data: data, FinishWrite: true})
		_, err = s.CloseAndRecv()
		return err
	}},
	{"ByteStream.QueryWriteStatus", access.WriteCAS, func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error {
		_, err := e.bs.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: writeName("acl", f.pick(missing, f.blob))})
		if missing && status.Code(err) == codes.NotFound {
			return nil // what an allowed caller gets for an upload that is not there
		}
		return err
	}},
	{"BatchUpdateBlobs", access.WriteCAS, func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error {
		data := f.data
		if missing {
			data = append([]byte("fresh batch "), data...)
		}
		resp, err := e.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: cas.DigestOf(data).Proto(), Data: data}}})
		if err == nil && resp.Responses[0].Status.GetCode() != 0 {
			err = status.ErrorProto(resp.Responses[0].Status)
		}
		return err
	}},
	{"GetActionResult", access.ReadAC, func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error {
		_, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: f.pick(missing, f.action).Proto()})
		if missing && status.Code(err) == codes.NotFound {
			return nil
		}
		return err
	}},
	{"UpdateActionResult", access.WriteAC, func(ctx context.Context, e *testEnv, f *accessFixture, missing bool) error {
		_, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: f.pick(missing, f.action).Proto(),
			ActionResult: &repb.ActionResult{StdoutDigest: f.blob.Proto()}})
		return err
	}},
}

// TestAccessPolicyCells calls every RPC as an anonymous client, as an
// authenticated user the policy allows, as one it does not, and with a wrong
// password, under three policies, and checks each answer against a table
// written out by hand: OK, UNAUTHENTICATED or PERMISSION_DENIED. A refusal
// says the same whether or not the blob or action result exists.
func TestAccessPolicyCells(t *testing.T) {
	const (
		ok     = codes.OK
		unauth = codes.Unauthenticated
		denied = codes.PermissionDenied
	)
	users := map[string]string{"alice": "alice-pw", "bob": "bob-pw"}
	type caller struct{ name, user, password string }
	callers := []caller{{"anonymous", "", ""}, {"alice", "alice", "alice-pw"}, {"bob", "bob", "bob-pw"}, {"wrong password", "alice", "guess"}}
	for _, pc := range []struct {
		name   string
		policy access.Policy
		// want[caller][op]: read-cas, write-cas, read-ac, write-ac.
		want map[string][access.NumOperations]codes.Code
	}{
		{
			"reads for everyone, writes for authenticated",
			access.Policy{ReadCAS: access.Anyone(), WriteCAS: access.Authenticated(), ReadAC: access.Anyone(), WriteAC: access.Authenticated()},
			map[string][access.NumOperations]codes.Code{
				"anonymous":      {ok, denied, ok, denied},
				"alice":          {ok, ok, ok, ok},
				"bob":            {ok, ok, ok, ok},
				"wrong password": {unauth, unauth, unauth, unauth},
			},
		},
		{
			"alice only, action cache writes for nobody else",
			access.Policy{ReadCAS: access.Authenticated(), WriteCAS: access.Authenticated(), ReadAC: access.Authenticated(), WriteAC: access.Only("alice")},
			map[string][access.NumOperations]codes.Code{
				"anonymous":      {unauth, unauth, unauth, unauth},
				"alice":          {ok, ok, ok, ok},
				"bob":            {ok, ok, ok, denied},
				"wrong password": {unauth, unauth, unauth, unauth},
			},
		},
		{
			"read-only",
			access.Policy{ReadCAS: access.Only("bob"), WriteCAS: access.Nobody(), ReadAC: access.Only("bob"), WriteAC: access.Nobody()},
			map[string][access.NumOperations]codes.Code{
				"anonymous":      {unauth, unauth, unauth, unauth},
				"alice":          {denied, denied, denied, denied},
				"bob":            {ok, denied, ok, denied},
				"wrong password": {unauth, unauth, unauth, unauth},
			},
		},
	} {
		t.Run(pc.name, func(t *testing.T) {
			e := newEnv(t, 0, Options{Access: &access.Control{Policy: pc.policy, Users: loadUsers(t, users)}})
			ctx := context.Background()
			f := &accessFixture{data: []byte("a blob readers read")}
			f.blob = cas.DigestOf(f.data)
			treeData, _ := marshalDeterministic(&repb.Directory{Files: []*repb.FileNode{{Name: "x", Digest: f.blob.Proto()}}})
			f.tree = cas.DigestOf(treeData)
			f.action = cas.DigestOf([]byte("an action"))
			for d, data := range map[cas.Digest][]byte{f.blob: f.data, f.tree: treeData} {
				if err := cas.Put(ctx, e.store, d, data, cas.Uncompressed); err != nil {
					t.Fatal(err)
				}
			}
			ar, _ := marshalDeterministic(&repb.ActionResult{StdoutDigest: f.blob.Proto()})
			if err := e.store.PutActionResult(ctx, f.action, ar); err != nil {
				t.Fatal(err)
			}
			for _, c := range callers {
				cctx := as(ctx, c.user, c.password)
				for _, rc := range rpcCases {
					want := pc.want[c.name][rc.op]
					if rc.name == "FindMissingBlobs" && pc.want[c.name][access.WriteCAS] == ok {
						want = ok // writers ask it before they upload
					}
					errExisting := rc.call(cctx, e, f, false)
					if got := status.Code(errExisting); got != want {
						t.Errorf("%s %s: %v (%v); want %v", c.name, rc.name, got, errExisting, want)
						continue
					}
					if want == ok {
						continue
					}
					errMissing := rc.call(cctx, e, f, true)
					if status.Code(errMissing) != want || status.Convert(errMissing).Message() != status.Convert(errExisting).Message() {
						t.Errorf("%s %s: refused with %q for an existing entry but %v %q for a missing one; a refusal must not tell them apart",
							c.name, rc.name, status.Convert(errExisting).Message(), status.Code(errMissing), status.Convert(errMissing).Message())
					}
				}
				// Capabilities: any allowed operation lets a caller see
				// them, and they say whether it may update the cache.
				caps, err := e.caps.GetCapabilities(cctx, &repb.GetCapabilitiesRequest{})
				any, wantCode := false, codes.OK
				for _, code := range pc.want[c.name] {
					any = any || code == ok
				}
				if !any {
					wantCode = pc.want[c.name][access.ReadCAS]
				}
				if status.Code(err) != wantCode {
					t.Errorf("%s GetCapabilities: %v; want %v", c.name, err, wantCode)
				} else if err == nil && caps.CacheCapabilities.ActionCacheUpdateCapabilities.GetUpdateEnabled() != (pc.want[c.name][access.WriteAC] == ok) {
					t.Errorf("%s GetCapabilities: update_enabled %v; want %v", c.name, !(pc.want[c.name][access.WriteAC] == ok), pc.want[c.name][access.WriteAC] == ok)
				}
			}
		})
	}
}

// TestAnonymousCannotPoisonTheActionCache: with reads for everyone and
// writes for authenticated users, an anonymous UpdateActionResult is
// PERMISSION_DENIED and the entry an authenticated user stored is served
// unchanged.
func TestAnonymousCannotPoisonTheActionCache(t *testing.T) {
	e := newEnv(t, 0, Options{Access: &access.Control{
		Policy: access.Policy{ReadCAS: access.Anyone(), WriteCAS: access.Authenticated(), ReadAC: access.Anyone(), WriteAC: access.Authenticated()},
		Users:  loadUsers(t, map[string]string{"ci": "ci-pw"}),
	}})
	ctx := context.Background()
	ci := as(ctx, "ci", "ci-pw")
	genuine := []byte("genuine output")
	gd := cas.DigestOf(genuine)
	if _, err := e.cas.BatchUpdateBlobs(ci, &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: gd.Proto(), Data: genuine}}}); err != nil {
		t.Fatal(err)
	}
	action := cas.DigestOf([]byte("compile main.go"))
	if _, err := e.ac.UpdateActionResult(ci, &repb.UpdateActionResultRequest{ActionDigest: action.Proto(), ActionResult: &repb.ActionResult{StdoutDigest: gd.Proto()}}); err != nil {
		t.Fatal(err)
	}
	poison := cas.DigestOf([]byte("POISONED"))
	_, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: action.Proto(), ActionResult: &repb.ActionResult{StdoutDigest: poison.Proto(), ExitCode: 0}})
	wantCode(t, err, codes.PermissionDenied, "an anonymous client may not write-ac")
	got, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: action.Proto()})
	if err != nil || got.StdoutDigest.GetHash() != gd.Hash {
		t.Fatalf("the entry after the anonymous update: %v, %v; want stdout %s", got, err, gd.Hash)
	}
	_, err = e.ac.UpdateActionResult(as(ctx, "ci", "guess"), &repb.UpdateActionResultRequest{ActionDigest: action.Proto(), ActionResult: &repb.ActionResult{StdoutDigest: poison.Proto()}})
	wantCode(t, err, codes.Unauthenticated, "invalid user name or password")
	if st := e.srv.Stats(); st.PermissionDenied != 1 || st.Unauthenticated != 1 {
		t.Errorf("refusals counted: %d permission denied, %d unauthenticated; want 1 and 1", st.PermissionDenied, st.Unauthenticated)
	}
}

// TestEveryRPCIsChecked calls every method the server registers, as an
// anonymous client of a server that lets anonymous clients do nothing:
// each method it implements (one that does not answer UNIMPLEMENTED to an
// authenticated client) must answer UNAUTHENTICATED, so a handler that
// forgets its check fails here.
func TestEveryRPCIsChecked(t *testing.T) {
	e := newEnv(t, 0, Options{Access: &access.Control{Policy: access.Policy{ReadCAS: access.Authenticated(), WriteCAS: access.Authenticated(), ReadAC: access.Authenticated(), WriteAC: access.Authenticated()}, Users: loadUsers(t, map[string]string{"u": "p"})}})
	call := func(ctx context.Context, full string, m grpc.MethodInfo) error {
		if !m.IsClientStream && !m.IsServerStream {
			return e.conn.Invoke(ctx, full, &emptypb.Empty{}, &emptypb.Empty{})
		}
		s, err := e.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: m.IsServerStream, ClientStreams: m.IsClientStream}, full)
		if err != nil {
			return err
		}
		s.SendMsg(&emptypb.Empty{})
		s.CloseSend()
		return s.RecvMsg(&emptypb.Empty{})
	}
	ctx := context.Background()
	implemented := 0
	for svc, info := range e.g.GetServiceInfo() {
		for _, m := range info.Methods {
			full := "/" + svc + "/" + m.Name
			if status.Code(call(as(ctx, "u", "p"), full, m)) == codes.Unimplemented {
				continue
			}
			implemented++
			if err := call(ctx, full, m); status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s as an anonymous client: %v; want UNAUTHENTICATED", full, err)
			}
		}
	}
	// ByteStream 3, CAS 8 (with splitting and splicing), ActionCache 2,
	// Capabilities 1, and the Remote Asset API's FetchBlob and PushBlob.
	if implemented != 16 {
		t.Errorf("the server implements %d methods; want the 16 of ByteStream, CAS, ActionCache, Capabilities, Fetch and Push", implemented)
	}
}

// TestClientCertificateIdentity: over mutual TLS, the client certificate's
// name is the identity the policy sees; a client without one is anonymous.
func TestClientCertificateIdentity(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	serverCert := ca.Server(t)
	tlsConf := &tls.Config{
		Certificates: []tls.Certificate{serverCert.TLS},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.VerifyClientCertIfGiven,
	}
	e := newEnvWithServerOptions(t, 0, Options{Access: &access.Control{
		Policy:             access.Policy{ReadCAS: access.Anyone(), WriteCAS: access.Only("builder"), ReadAC: access.Anyone(), WriteAC: access.Only("builder")},
		ClientCertificates: true,
	}}, grpc.Creds(credentials.NewTLS(tlsConf)))
	addr := e.conn.Target()
	dialAs := func(cert *testpki.Leaf) repb.ActionCacheClient {
		conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		if cert != nil {
			// Sent whatever CAs the server asks for (Go's client would
			// otherwise keep back one the server did not name).
			conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.TLS, nil }
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return repb.NewActionCacheClient(conn)
	}
	ctx := context.Background()
	update := &repb.UpdateActionResultRequest{ActionDigest: cas.DigestOf([]byte("a")).Proto(), ActionResult: &repb.ActionResult{ExitCode: 3}}
	if _, err := dialAs(ca.Client(t, "builder")).UpdateActionResult(ctx, update); err != nil {
		t.Errorf("as builder: %v; want it allowed", err)
	}
	_, err := dialAs(ca.Client(t, "laptop")).UpdateActionResult(ctx, update)
	wantCode(t, err, codes.PermissionDenied, "laptop (mtls) may not write-ac")
	_, err = dialAs(nil).UpdateActionResult(ctx, update)
	wantCode(t, err, codes.PermissionDenied, "an anonymous client may not write-ac")
	// A certificate from another CA does not get through the handshake.
	other := testpki.NewCA(t, "another CA")
	_, err = dialAs(other.Client(t, "builder")).UpdateActionResult(ctx, update)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("with a certificate from another CA: %v; want the handshake refused (UNAVAILABLE)", err)
	}
}
