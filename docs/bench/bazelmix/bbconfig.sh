#!/bin/bash
# bbconfig DIR GRPC HTTP: a bb-storage config for a build's cache under DIR: the CAS of
# ../writepath/peers/bbconfig.sh (a local CAS on file-backed block devices, BB_GIB GiB) and
# a local action cache behind completeness checking (a hit only when the outputs it names
# are in the CAS, as production Buildbarn runs it and as membuf checks), no authentication.
D=$1; G=$2; H=$3
mkdir -p $D/state $D/ac
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
      "blocksOnBlockDevice": {"source": {"file": {"path": "$D/blocks", "sizeBytes": $((${BB_GIB:-4} << 30))}}, "spareBlocks": 2},
      "persistent": {"stateDirectoryPath": "$D/state", "minimumEpochInterval": "300s"}
    }},
    "getAuthorizer": {"allow": {}}, "putAuthorizer": {"allow": {}}, "findMissingAuthorizer": {"allow": {}}
  },
  "actionCache": {
    "backend": {"completenessChecking": {"maximumTotalTreeSizeBytes": 16777216, "backend": {"local": {
      "keyLocationMapInMemory": {"entries": 1048576},
      "keyLocationMapMaximumGetAttempts": 16,
      "keyLocationMapMaximumPutAttempts": 64,
      "oldBlocks": 8, "currentBlocks": 24, "newBlocks": 1,
      "blocksOnBlockDevice": {"source": {"file": {"path": "$D/ac/blocks", "sizeBytes": 268435456}}, "spareBlocks": 3}
    }}}},
    "getAuthorizer": {"allow": {}}, "putAuthorizer": {"allow": {}}
  }
}
JSON
