package access_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// One decision, two answers: what each protocol answers each kind of
// caller under a policy that lets anonymous callers do something and one
// that lets them do nothing.
func TestAuthorizeAnswersBothProtocolsAlike(t *testing.T) {
	users, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, map[string]string{"alice": "secret"}))
	if err != nil {
		t.Fatal(err)
	}
	request := func(auth string) access.Credentials {
		r := httptest.NewRequest(http.MethodGet, "/cas/x", nil)
		if auth != "" {
			r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(auth)))
		}
		return access.HTTPCredentials(r)
	}
	openRead := &access.Control{Users: users, Policy: access.Policy{ReadCAS: access.Anyone(), WriteCAS: access.Only("bob")}}
	closed := &access.Control{Users: users, Policy: access.Policy{ReadCAS: access.Authenticated(), WriteCAS: access.Only("bob")}}
	for _, tc := range []struct {
		name     string
		control  *access.Control
		auth     string
		op       access.Operation
		allowed  bool
		reason   access.DenialReason
		grpcCode codes.Code
		httpCode int
		message  string
	}{
		{"no control", nil, "", access.WriteCAS, true, 0, codes.OK, 0, ""},
		{"anonymous reader", openRead, "", access.ReadCAS, true, 0, codes.OK, 0, ""},
		{"anonymous writer, anonymous may read", openRead, "", access.WriteCAS, false, access.AnonymousNotPermitted, codes.PermissionDenied, 401, "an anonymous client may not write-cas"},
		{"anonymous, anonymous may do nothing", closed, "", access.ReadCAS, false, access.NoCredentials, codes.Unauthenticated, 401, "credentials are needed to read-cas"},
		{"wrong password", openRead, "alice:wrong", access.ReadCAS, false, access.BadCredentials, codes.Unauthenticated, 401, ""},
		{"authenticated, not permitted", closed, "alice:secret", access.WriteCAS, false, access.NotPermitted, codes.PermissionDenied, 403, "alice (basic) may not write-cas"},
		{"authenticated reader", closed, "alice:secret", access.ReadCAS, true, 0, codes.OK, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, denied := tc.control.Authorize(request(tc.auth), tc.op)
			if (denied == nil) != tc.allowed {
				t.Fatalf("Authorize: denial %v, want allowed %v", denied, tc.allowed)
			}
			if tc.allowed {
				return
			}
			if denied.Reason != tc.reason {
				t.Errorf("reason %d, want %d", denied.Reason, tc.reason)
			}
			var err error = denied
			if got := status.Code(err); got != tc.grpcCode {
				t.Errorf("gRPC code %v, want %v", got, tc.grpcCode)
			}
			code, msg := denied.HTTP()
			if code != tc.httpCode {
				t.Errorf("HTTP %d, want %d", code, tc.httpCode)
			}
			if tc.message != "" && !strings.Contains(status.Convert(err).Message(), tc.message) && !strings.Contains(msg, tc.message) {
				t.Errorf("messages %q and %q, want %q", status.Convert(err).Message(), msg, tc.message)
			}
		})
	}
}
