#!/usr/bin/env bash
# Build (and with `test`, run the end-to-end test of) the Go client offline, in GOPATH mode,
# from Debian's packages (see README.md). Usage: clients/go/build.sh [test]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
gopath="${OMA_GO_GOPATH:-${TMPDIR:-/tmp}/oma-go-gopath}"
rm -rf "$gopath/src/oma.local"
mkdir -p "$gopath/src/oma.local" "$gopath/bin"
# Generated code stays out of the repository: it is made here from the proto on every build.
protoc -I "$root/proto" -I /usr/include \
  --go_out="$gopath/src" --go_opt=Moma/v1/sidecar.proto=oma.local/gen/omav1 \
  --go-grpc_out="$gopath/src" --go-grpc_opt=Moma/v1/sidecar.proto=oma.local/gen/omav1 \
  "$root/proto/oma/v1/sidecar.proto"
cp -r "$here/omaclient" "$here/cmd" "$gopath/src/oma.local/"
export GO111MODULE=off GOPROXY=off GOFLAGS= GOPATH="$gopath:/usr/share/gocode"
export GOCACHE="${GOCACHE:-$gopath/cache}"
go vet oma.local/omaclient oma.local/cmd/omaexample
go build -o "$gopath/bin/omaexample" oma.local/cmd/omaexample
echo "built $gopath/bin/omaexample"
if [[ "${1:-}" == "test" ]]; then
  OMA_ROOT="$root" go test -count=1 -v oma.local/omaclient
fi
