#!/usr/bin/env bash
# The outside-consumer test: proves that every module of this checkout can
# be used by a program outside the repository, as a user gets them from a
# module proxy once they are tagged (RELEASING.md).
#
#   1. reads the release version: the version of github.com/toolrun/toolrun
#      that every nested module requires (they must agree);
#   2. writes a file-based module proxy holding this checkout's modules at
#      that version (.ci/consumer/mkproxy, golang.org/x/mod/zip);
#   3. in a temporary module outside the repository, with GOWORK=off,
#      GOFLAGS=-mod=mod and GOPROXY=file://<proxy>,<the configured proxy>,
#      goes get each module, builds and runs a program that uses each;
#   4. builds each nested module by itself (GOWORK=off), resolving the root
#      module from the file proxy, not from ../;
#   5. go installs cmd/toolrun@<version> and runs "toolrun version" and the
#      offline demo with the installed binary.
#
# Nothing but the file proxy and the configured Go module proxy is reached;
# GONOSUMDB keeps the test versions of github.com/toolrun out of the
# checksum database. Run from anywhere: bash .ci/consumer.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

nested=(sqlitestore toolrunotel serve temporal cmd/toolrun bench)
version=
for m in "${nested[@]}"; do
  v=$(awk '$1 == "github.com/toolrun/toolrun" {print $2} $1 == "require" && $2 == "github.com/toolrun/toolrun" {print $3}' "$m/go.mod" | head -1)
  if [ -z "$v" ]; then
    echo "consumer: $m/go.mod does not require github.com/toolrun/toolrun" >&2
    exit 1
  fi
  if grep -Eq '^replace .*github.com/toolrun/toolrun' "$m/go.mod"; then
    echo "consumer: $m/go.mod replaces github.com/toolrun/toolrun; a release must not (RELEASING.md)" >&2
    exit 1
  fi
  if [ -n "$version" ] && [ "$v" != "$version" ]; then
    echo "consumer: the nested modules require different versions of the root: $version and $v ($m)" >&2
    exit 1
  fi
  version=$v
done
echo "== consumer: modules at $version"

work=$(mktemp -d -t toolrun-consumer.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
proxy="$work/proxy"
(cd .ci/consumer && GOWORK=off go build -o "$work/mkproxy" ./mkproxy)
"$work/mkproxy" -repo "$repo" -version "$version" -o "$proxy" . "${nested[@]}"

upstream=$(go env GOPROXY)
export GOWORK=off
export GOFLAGS=-mod=mod
export GOPROXY="file://$proxy,$upstream"
export GONOSUMDB=github.com/toolrun
export GOBIN="$work/bin"
# The go command indexes the packages of each module version in the module
# cache once (its "module index", in GOCACHE), taking a version's files as
# fixed forever. Our test version changes with every commit, so the index
# must not be used: without this, a build reads the file list of an earlier
# v0.1.0 ("open …/event.go: no such file or directory").
export GODEBUG=goindex=0
# A module cache of the consumer's own would fetch every third-party module
# again; share the machine's, but keep our test versions out of it.
cleanup_cache() {
  modcache=$(go env GOMODCACHE)
  chmod -R u+w "$modcache/github.com/toolrun" "$modcache/cache/download/github.com/toolrun" 2>/dev/null || true
  rm -rf "$modcache/github.com/toolrun" "$modcache/cache/download/github.com/toolrun"
}
cleanup_cache
trap 'cleanup_cache; chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# A program that imports only the library gets only the library's
# requirements: none of the browser, profiling or SQLite modules that the
# server, the benchmarks and the stores need.
lean="$work/lean"
mkdir -p "$lean"
(
  cd "$lean"
  go mod init example.com/lean >/dev/null 2>&1
  cat >main.go <<'GO'
// Command lean uses the library alone.
package main

import (
	"fmt"

	"github.com/toolrun/toolrun"
)

func main() { fmt.Println(toolrun.StopEndTurn) }
GO
  go get "github.com/toolrun/toolrun@$version"
  go mod tidy
  go build -o lean .
  if go mod graph | grep -E ' (github.com/chromedp/|github.com/google/pprof|modernc.org/sqlite|go.temporal.io/)'; then
    echo "consumer: a program that imports only github.com/toolrun/toolrun requires the modules above" >&2
    exit 1
  fi
  echo "== consumer: the library alone requires none of chromedp, cdproto, pprof, sqlite, temporal"
)

consumer="$work/consumer"
mkdir -p "$consumer"
cd "$consumer"
go mod init example.com/consumer >/dev/null 2>&1
cat >main.go <<'GO'
// Command consumer uses every module of toolrun, as a program outside its
// repository would.
package main

import (
	"context"
	"fmt"
	"path/filepath"
	"os"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/sqlitestore"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolrunotel"
	"github.com/toolrun/toolrun/toolruntest"
)

type in struct {
	Name string `json:"name"`
}

func main() {
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_01", "greet", map[string]any{"name": "consumer"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	defer s.Close()
	greet := toolrun.NewTool("greet", "Greets someone.", func(ctx context.Context, x in) (string, error) {
		return "hello, " + x.Name, nil
	})
	obs := toolrunotel.New(toolrunotel.Options{})
	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 256,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("hi"))},
	}
	r := toolrun.New(s.Client(), params, []toolrun.Tool{greet}, &toolrun.Options{OnEvent: obs.Observe})
	res, err := r.Run(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	store, err := sqlitestore.Open(filepath.Join(os.TempDir(), "consumer.db"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer store.Close()
	_ = temporal.NewInput(params, nil)
	fmt.Println("stopped:", res.StopReason, "tool calls:", res.ToolCalls)
}
GO
for m in github.com/toolrun/toolrun github.com/toolrun/toolrun/sqlitestore github.com/toolrun/toolrun/toolrunotel github.com/toolrun/toolrun/temporal; do
  echo "== consumer: go get $m@$version"
  go get "$m@$version"
done
go mod tidy
echo "== consumer: go build, go vet, run"
go vet .
go build -o consumer .
TMPDIR="$work" ./consumer

for m in "${nested[@]}"; do
  echo "== consumer: $m alone (GOWORK=off), the root from the proxy"
  mkdir -p "$(dirname "$work/alone/$m")"
  cp -R "$repo/$m" "$work/alone/$m"
  (cd "$work/alone/$m" && go build ./... && go vet ./...)
done

echo "== consumer: go install github.com/toolrun/toolrun/cmd/toolrun@$version"
go install "github.com/toolrun/toolrun/cmd/toolrun@$version"
"$GOBIN/toolrun" version | tee "$work/version.txt"
if ! grep -q "$version" "$work/version.txt"; then
  echo "consumer: toolrun version does not say $version" >&2
  exit 1
fi
(cd "$work" && env -u ANTHROPIC_API_KEY TMPDIR="$work" "$GOBIN/toolrun" demo --yes --record off </dev/null >/dev/null)
echo "== consumer: ok"
