#!/bin/bash
# bbconfig DIR GRPC HTTP: writes a bb-storage config with a local CAS on file-backed block devices under DIR.
# BB_AC=1 adds a local action cache behind completeness checking (a hit only when the outputs it
# names are in the CAS, as production Buildbarn runs it): for a build's cache (../../bazelmix).
D=$1; G=$2; H=$3
mkdir -p $D/state $D/ac
AC=""
if [ "${BB_AC:-0}" = 1 ]; then
  AC=',
  "actionCache": {
    "backend": {"completenessChecking": {"maximumTotalTreeSizeBytes": 16777216, "backend": {"local": {
      "keyLocationMapInMemory": {"entries": 1048576},
      "keyLocationMapMaximumGetAttempts": 16,
      "keyLocationMapMaximumPutAttempts": 64,
      "oldBlocks": 8, "currentBlocks": 24, "newBlocks": 1,
      "blocksOnBlockDevice": {"source": {"file": {"path": "'$D'/ac/blocks", "sizeBytes": 268435456}}, "spareBlocks": 3}
    }}}},
    "getAuthorizer": {"allow": {}}, "putAuthorizer": {"allow": {}}
  }'
fi
cat > $D/bb.json <<JSON
{
  "grpcServers": [{"listenAddresses": ["127.0.0.1:$G"], "authenticationPolicy": {"allow": {}}}],
  "maximumMessageSizeBytes": 16777216,
  "global": {"diagnosticsHttpServer": {"httpServers": [{"listenAddresses": ["127.0.0.1:$H"], "authenticationPolicy": {"allow": {}}}], "enablePrometheus": true}},
  "contentAddressableStorage": {
    "backend": {"local": {
      "keyLocationMapOnBlockDevice": {"file": {"path": "$D/kl", "sizeBytes": 400000000}},
      "keyLocationMapMaximumGetAttempts": 16,
      "keyLocationMapMaximumPutAttempts": 64,
      "oldBlocks": 2, "currentBlocks": 4, "newBlocks": 4,
      "blocksOnBlockDevice": {"source": {"file": {"path": "$D/blocks", "sizeBytes": $((${BB_GIB:-6} << 30))}}, "spareBlocks": 2},
      "persistent": {"stateDirectoryPath": "$D/state", "minimumEpochInterval": "300s"}
    }},
    "getAuthorizer": {"allow": {}}, "putAuthorizer": {"allow": {}}, "findMissingAuthorizer": {"allow": {}}
  }$AC
}
JSON
