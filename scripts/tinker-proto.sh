#!/usr/bin/env bash
# Regenerates api/tinker/tinkerpb from the Tinker SDK pinned in
# python/peers-requirements.txt: renders the SDK's compiled schema as
# tinker_public.proto (python/tinker_proto_schema.py), checks that protoc
# compiles it back to the SDK's descriptor exactly, then runs
# `go generate ./api/tinker/tinkerpb` (protoc + protoc-gen-go).
#
# Needs protoc (Debian: apt-get install -y protobuf-compiler) and
# protoc-gen-go (go install google.golang.org/protobuf/cmd/protoc-gen-go@latest)
# on PATH; the SDK is installed by scripts/peers.sh's peers_python.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
eval "$(sed -n '/^peers_python()/,/^}/p' scripts/peers.sh)"
py=$(peers_python)
dir=api/tinker/tinkerpb
"$py" python/tinker_proto_schema.py write "$dir/tinker_public.proto"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
protoc -I "$dir" --descriptor_set_out="$tmp" "$dir/tinker_public.proto"
"$py" python/tinker_proto_schema.py check "$tmp"
PATH=$PATH:$(go env GOPATH)/bin go generate ./$dir
