package reapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
)

// plainSuite is the name of the test that runs the server tests again on
// plain gRPC servers; newEnv makes a plain server for every test under it.
const plainSuite = "TestSuiteOnPlainServer"

// serverOptionsForTests is how newEnv makes its gRPC server for t: as
// `membuf serve` does (ServerOptions: grpcmem's codec and the zero-copy
// ByteStream path), so that every rule of the server is checked on the path
// users run; and, for the subtests of TestSuiteOnPlainServer, without them,
// so that the handlers' fallback (a server registered without
// ServerOptions) is held to the same rules.
func serverOptionsForTests(t testing.TB, opts Options) []grpc.ServerOption {
	if strings.HasPrefix(t.Name(), plainSuite+"/") {
		return []grpc.ServerOption{}
	}
	return ServerOptions(opts.Pool)
}

// serverTests are the tests whose servers newEnv makes, each run again by
// TestSuiteOnPlainServer. TestServerTestsListed keeps the list complete.
var serverTests = []func(*testing.T){
	TestAccessPolicyCells,
	TestActionCache,
	TestActionResultNamingABlobLostInACrashIsAMiss,
	TestActionResultOutputPaths,
	TestAnonymousCannotPoisonTheActionCache,
	TestBatchAnswersOfManyBadEntries,
	TestBatchReadAnswersFitTheSendLimit,
	TestBatchReadBlobs,
	TestBatchUpdateBlobs,
	TestCapabilities,
	TestConcurrentWritesOfOneBlob,
	TestCorruptBlobIsNotFound,
	TestEveryRPCIsChecked,
	TestEvictionKeepsStoreUnderMaxSize,
	TestFindMissingBlobs,
	TestGetActionResultInlinesOnlyForCASReaders,
	TestGetActionResultInlinesUnderTheActionsFunction,
	TestGetActionResultInlinesWithinBounds,
	TestGetActionResultMissesIncompleteTrees,
	TestIdleUploadsHoldNoDescriptors,
	TestInstanceIsolationSeparatesActionResults,
	TestInstanceKeysAreNotReachableThroughAnotherInstance,
	TestInstanceRulesOverGRPC,
	TestKeptUploadsCapped,
	TestGetTree,
	TestGetTreePagesCostTheirOwnReads,
	TestKilledUploadCanResume,
	TestKilledUploadLeavesNothingBehind,
	TestOpenUploadsCapped,
	TestPartialUploadsCountTowardsMaxSize,
	TestPartialUploadsDiscarded,
	TestReadNotFoundEmptyAndBadNames,
	TestReadOffsetsAndLimits,
	TestRestartKeepsBlobs,
	TestUnimplementedRPCs,
	TestWriteCompletedByAnotherUpload,
	TestWriteExistingBlobReturnsAtOnce,
	TestWriteMismatchStoresNothing,
	TestWriteProtocolViolations,
	TestWriteResumeAfterStreamEnds,
	TestWriteThenRead,
	TestWriteWaitForBusyUploadHonoursDeadline,
	TestZstdBatches,
	TestZstdReadArguments,
	TestZstdUploadWaitsForMemory,
	TestZstdWriteBadStreams,
	TestZstdWriteProtocol,
	TestZstdWriteThenRead,
}

// TestSuiteOnPlainServer runs every server test again, as a subtest of its
// own, on plain gRPC servers: both ByteStream paths must follow every rule.
func TestSuiteOnPlainServer(t *testing.T) {
	serverTestsByName(t) // fails on a test listed twice
	for _, test := range serverTests {
		t.Run(funcName(test), test)
	}
}

// TestServerTestsListed fails when a test in this package makes its server
// with newEnv but is missing from serverTests, which would leave the plain
// server's path unchecked by it.
func TestServerTestsListed(t *testing.T) {
	listed := serverTestsByName(t)
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var missing []string
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == plainSuite {
				continue
			}
			if callsNewEnv(fn) && listed[fn.Name.Name] == nil {
				missing = append(missing, fn.Name.Name)
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("these tests make their server with newEnv but are not in serverTests (servermode_test.go), so they never run on a plain server: %s", strings.Join(missing, ", "))
	}
}

func callsNewEnv(fn *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fn, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "newEnv" {
				found = true
			}
		}
		return !found
	})
	return found
}

// serverTestsByName names each function of serverTests by itself.
func serverTestsByName(t *testing.T) map[string]func(*testing.T) {
	byName := map[string]func(*testing.T){}
	for _, test := range serverTests {
		name := funcName(test)
		if byName[name] != nil {
			t.Fatalf("%s is listed twice in serverTests", name)
		}
		byName[name] = test
	}
	return byName
}

// funcName returns the unqualified name of the function f.
func funcName(f func(*testing.T)) string {
	name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	return name[strings.LastIndexByte(name, '.')+1:]
}
