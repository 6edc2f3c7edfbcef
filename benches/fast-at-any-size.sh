#!/bin/sh
# Whole-process benchmarks of issue "Fast at any size": a scripted 5-turn bug
# fix, a Bash `true` round and a first session, each in a small fixture and
# in a generated 50,000-file git repository, with checkpoints on and off,
# run interleaved (A B A B …) so that the ratios hold on a shared machine.
#
#   benches/fast-at-any-size.sh [RUNS]        (default 5)
#
# Needs KAJI (the kaji binary) and SERVER (the kaji-scripted-model binary),
# e.g. KAJI=target/release/kaji SERVER=target/release/kaji-scripted-model.
# Everything it makes lives under $BENCH_DIR (default /tmp/kaji-bench-37);
# nothing is written to the repository. Prints one line per measurement:
# medians of wall seconds (from `date +%s%N`, not /usr/bin/time's 10 ms
# steps) and peak RSS (KB, /usr/bin/time), the median of the pair-by-pair
# ratios A/B and the median of the pair-by-pair differences A-B in ms.
#
# The checkpoint costs are isolated from pairs of the same task with
# checkpoints on (A) and off (B): an Edit task (`E1`) and a task of two
# Edits (`E2`), so that
#   one Edit's checkpoint      = (E2 on - E2 off) - (E1 on - E1 off)
#   a task's first checkpoint  = (E1 on - E1 off) - one Edit's checkpoint
# (each from medians of pairwise differences); and a Bash `true` round
# against a task without it, once with checkpoints on and once off. Every
# task is also run once under `strace -f -e trace=execve` to count the git
# processes it starts (a detached copy of borrowed objects included: strace
# follows it to its end; timed runs wait for it untimed, see copies_ended).
# MODE=quick skips the 5-turn fix, the first sessions and Grep; MODE=memory
# runs only memory_parts (below): where the 5-turn fix's peak RSS comes from.
set -eu
RUNS=${1:-5}
KAJI=${KAJI:?set KAJI to the kaji binary}
SERVER=${SERVER:?set SERVER to the kaji-scripted-model binary}
for bin in "$KAJI" "$SERVER"; do
    [ -x "$bin" ] || { echo "not an executable file: $bin" >&2; exit 2; }
done
BENCH_DIR=${BENCH_DIR:-/tmp/kaji-bench-37}
mkdir -p "$BENCH_DIR"
cd "$BENCH_DIR"

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@example.com
export GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@example.com

# --- the trees -------------------------------------------------------------
bugfix_files() { # $1: directory
    printf 'def add(a, b):\n    return a - b\n' > "$1/calc.orig"
    cp "$1/calc.orig" "$1/calc.py"
    printf "grep -q 'return a + b' calc.py && echo PASS\n" > "$1/check.sh"
}
if [ ! -d fixture/.git ]; then
    rm -rf fixture && mkdir fixture
    for i in 1 2 3 4 5 6 7 8; do printf 'module %s\n' "$i" > "fixture/m$i.txt"; done
    bugfix_files fixture
    git -C fixture init -q && git -C fixture add . && git -C fixture commit -qm fixture
fi
if [ ! -d big/.git ]; then
    rm -rf big && mkdir big
    # 500 directories of 100 files of about 300 bytes: 50,000 files.
    awk 'BEGIN {
        for (d = 0; d < 500; d++) {
            dir = sprintf("big/dir%d/sub%d", int(d / 50), d); system("mkdir -p " dir)
            for (f = 0; f < 100; f++) {
                file = sprintf("%s/file%d.txt", dir, f)
                for (l = 0; l < 8; l++) printf "content of file %d in directory %d\n", f, d > file
                close(file)
            }
        }
    }'
    bugfix_files big
    git -C big init -q && git -C big add . && git -C big commit -qm big
fi

# --- the scripts -------------------------------------------------------------
tool() { printf '{"parts": [{"type": "tool_call", "name": "%s", "input": %s}]}' "$1" "$2"; }
done_turn=$(tool AttemptCompletion '{"result": "done"}')
cat > fix.json <<EOF
{"turns": [
 $(tool Read '{"file_path": "calc.py"}'),
 $(tool Grep '{"pattern": "return a - b"}'),
 $(tool Edit '{"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"}'),
 $(tool Bash '{"command": "sh check.sh"}'),
 $done_turn
]}
EOF
cat > true.json <<EOF
{"turns": [ $(tool Bash '{"command": "true"}'), $done_turn ]}
EOF
cat > edit.json <<EOF
{"turns": [ $(tool Edit '{"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"}'), $done_turn ]}
EOF
cat > edit2.json <<EOF
{"turns": [ $(tool Edit '{"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"}'),
 $(tool Edit '{"file_path": "calc.py", "old_string": "return a + b", "new_string": "return (a + b)"}'), $done_turn ]}
EOF
cat > grep.json <<EOF
{"turns": [ $(tool Grep '{"pattern": "return a - b"}'), $done_turn ]}
EOF
cat > none.json <<EOF
{"turns": [ $done_turn ]}
EOF
# The 5-turn fix whose Bash step also notes the kaji process's memory at
# that point (its own pages against the files' pages it has mapped).
KAJI_COMM=$(basename "$KAJI" | cut -c1-15)
cat > mem.json <<EOF
{"turns": [
 $(tool Read '{"file_path": "calc.py"}'),
 $(tool Grep '{"pattern": "return a - b"}'),
 $(tool Edit '{"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"}'),
 $(tool Bash "{\"command\": \"p=\$PPID; while [ \$p -gt 1 ] && [ \$(cat /proc/\$p/comm) != $KAJI_COMM ]; do p=\$(cut -d' ' -f4 /proc/\$p/stat); done; grep -E '^(VmHWM|RssAnon|RssFile)' /proc/\$p/status > $BENCH_DIR/mem.txt; sh check.sh\"}"),
 $done_turn
]}
EOF

start_server() { # $1: script; prints the URL
    "$SERVER" --script "$1" > "server-$2.out" &
    echo $! > "server-$2.pid"
    while ! head -n1 "server-$2.out" 2>/dev/null | grep -q http; do :; done
    head -n1 "server-$2.out"
}
URL_FIX=$(start_server fix.json fix)
URL_TRUE=$(start_server true.json true)
URL_EDIT=$(start_server edit.json edit)
URL_EDIT2=$(start_server edit2.json edit2)
URL_NONE=$(start_server none.json none)
URL_GREP=$(start_server grep.json grep)
URL_MEM=$(start_server mem.json mem)
trap 'for s in fix true edit edit2 none grep mem; do kill "$(cat server-$s.pid)" 2>/dev/null || true; done' EXIT

# --- measuring -----------------------------------------------------------------
# one_run DIR URL HOME FLAGS... : runs kaji exec once, prints "wall_s rss_kb".
one_run() {
    dir=$1 url=$2 home=$3; shift 3
    cp "$dir/calc.orig" "$dir/calc.py"
    t0=$(date +%s%N)
    KAJI_HOME="$home" ANTHROPIC_API_KEY=k /usr/bin/time -f '%M' -o time.out \
        $TRACE "$KAJI" exec --json --yolo --provider anthropic --model scripted \
        --base-url "$url" -C "$dir" "$@" go > /dev/null 2> run.err || {
        echo "kaji failed:" >&2; cat run.err >&2; exit 1; }
    t1=$(date +%s%N)
    copies_ended "$home"
    echo "$t0 $t1 $(tail -n1 time.out)" | awk '{ printf "%.4f %d\n", ($2 - $1) / 1e9, $3 }'
}

# copies_ended HOME: waits (untimed) until no detached copy of borrowed
# objects holds a shadow's borrow lock, so none runs beside the next run.
copies_ended() {
    for lock in "$1"/checkpoints/*/kaji-borrow.lock; do
        [ -e "$lock" ] && flock "$lock" true
    done
    return 0
}
TRACE=

# gits NAME DIR URL HOME FLAGS...: the git processes one run starts, by
# subcommand.
gits() {
    name=$1; shift
    TRACE="strace -f -qq -v -s 300 -e trace=execve -e status=successful -o $BENCH_DIR/strace.out"
    one_run "$@" > /dev/null
    TRACE=
    # the subcommand: the first argument that is not an option of git's own
    grep -o 'execve("[^"]*/git", \[.*\]' strace.out | sed 's/^[^[]*\["git", //; s/\]$//' |
        awk -F'", "' '{ for (i = 1; i <= NF; i++) { a = $i; sub(/"\].*$/, "", a); gsub(/"/, "", a)
            if (a == "-c" || a == "-C") { i++; continue }
            if (a ~ /^-/) continue
            print a; break } }' > gits.txt
    n=$(wc -l < gits.txt)
    what=$(sort gits.txt | uniq -c | sort -rn | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')
    printf '%-38s %3d git: %s\n' "$name" "$n" "$what"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# compare NAME DIR URL_A FLAGS_A URL_B FLAGS_B [fresh]: A and B in turn.
# With "fresh", each run gets a new KAJI_HOME (a first session).
compare() {
    name=$1 dir=$2 url_a=$3 flags_a=$4 url_b=$5 flags_b=$6 fresh=${7:-}
    : > a.txt; : > b.txt; : > ratio.txt; : > diff.txt
    home_a=$BENCH_DIR/home-a home_b=$BENCH_DIR/home-b
    rm -rf "$home_a" "$home_b"
    one_run "$dir" "$url_a" "$home_a" $flags_a > /dev/null # warm-up
    one_run "$dir" "$url_b" "$home_b" $flags_b > /dev/null
    i=0
    while [ $i -lt "$RUNS" ]; do
        [ -n "$fresh" ] && rm -rf "$home_a" "$home_b"
        a=$(one_run "$dir" "$url_a" "$home_a" $flags_a)
        b=$(one_run "$dir" "$url_b" "$home_b" $flags_b)
        echo "$a" >> a.txt; echo "$b" >> b.txt
        echo "$a $b" | awk '{ print ($3 > 0) ? $1 / $3 : 0 }' >> ratio.txt
        echo "$a $b" | awk '{ print ($1 - $3) * 1000 }' >> diff.txt
        i=$((i + 1))
    done
    LAST_DIFF=$(median < diff.txt)
    printf '%-42s A %6.3f s %6d KB | B %6.3f s %6d KB | A/B %5.2f | A-B %6.1f ms\n' "$name" \
        "$(cut -d' ' -f1 a.txt | median)" "$(cut -d' ' -f2 a.txt | median)" \
        "$(cut -d' ' -f1 b.txt | median)" "$(cut -d' ' -f2 b.txt | median)" \
        "$(median < ratio.txt)" "$LAST_DIFF"
}

# grep_vs_rg DIR: a Grep round (A) against none (B) and `rg -l` with as
# many threads as kaji's walker (one per core), all three in turn; the
# Grep round's cost is median(A) - median(B). Both sessions run with
# --no-checkpoints: otherwise the Grep round runs beside the initial
# checkpoint's background work, which the no-tool session ends before.
grep_vs_rg() {
    dir=$1; : > a.txt; : > b.txt; : > rg.txt
    rm -rf "$BENCH_DIR/home-g"
    i=0
    while [ $i -le "$RUNS" ]; do # the first round is a warm-up
        a=$(one_run "$dir" "$URL_GREP" "$BENCH_DIR/home-g" --no-checkpoints)
        b=$(one_run "$dir" "$URL_NONE" "$BENCH_DIR/home-g" --no-checkpoints)
        /usr/bin/time -f '%e %M' -o time.out rg -j "$(nproc)" -l 'return a - b' "$dir" > /dev/null
        if [ $i -gt 0 ]; then echo "$a" >> a.txt; echo "$b" >> b.txt; cat time.out >> rg.txt; fi
        i=$((i + 1))
    done
    ga=$(cut -d' ' -f1 a.txt | median) gb=$(cut -d' ' -f1 b.txt | median) r=$(cut -d' ' -f1 rg.txt | median)
    echo "Grep ($dir): round $ga s, none $gb s, Grep alone $(echo "$ga $gb" | awk '{ print $1 - $2 }') s; rg -j$(nproc) $r s; ratio $(echo "$ga $gb $r" | awk '{ print ($3 > 0) ? ($1 - $2) / $3 : 0 }')"
}

# memory_parts: the 5-turn fix (fixture, --no-checkpoints) with a fresh copy
# of the binary in three states of the page cache: just written (as
# `cargo install` leaves it), read back whole, and read from disk at start
# (after dropping the caches, when run as root). Prints the peak RSS and,
# at the Bash round, the process's own memory (RssAnon: heap, stacks, the
# data the loader relocated) and the file pages it has mapped (RssFile: the
# binary's code and data, the C library), all in KB, medians of $RUNS.
memory_parts() {
    copy=$BENCH_DIR/$KAJI_COMM
    for state in written read-back cold; do
        : > m.txt
        i=0
        while [ $i -lt "$RUNS" ]; do
            rm -f "$copy"; cp "$KAJI" "$copy"
            case $state in
                read-back) cat "$copy" > /dev/null ;;
                cold) sync; echo 1 2> /dev/null > /proc/sys/vm/drop_caches || { echo "memory ($state): needs root, skipped"; break; } ;;
            esac
            rss=$(KAJI=$copy one_run fixture "$URL_MEM" "$BENCH_DIR/home-m" --no-checkpoints | cut -d' ' -f2)
            echo "$rss $(awk '{ printf "%s ", $2 }' mem.txt)" >> m.txt
            i=$((i + 1))
        done
        [ -s m.txt ] && printf 'memory, 5-turn fix (%s): peak RSS %d KB; at the Bash round RssAnon %d KB, RssFile %d KB\n' "$state" \
            "$(cut -d' ' -f1 m.txt | median)" "$(cut -d' ' -f3 m.txt | median)" "$(cut -d' ' -f4 m.txt | median)"
    done
    rm -f "$copy"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "A = checkpoints on, B = --no-checkpoints unless said otherwise; medians of $RUNS"
if [ "${MODE:-}" = memory ]; then
    memory_parts
    exit 0
fi
for tree in fixture big; do
    if [ "${MODE:-}" != quick ]; then
        compare "5-turn fix ($tree)" "$tree" "$URL_FIX" "" "$URL_FIX" "--no-checkpoints"
    fi
    compare "E1: 1 Edit ($tree)" "$tree" "$URL_EDIT" "" "$URL_EDIT" "--no-checkpoints"
    e1=$LAST_DIFF
    compare "E2: 2 Edits ($tree)" "$tree" "$URL_EDIT2" "" "$URL_EDIT2" "--no-checkpoints"
    e2=$LAST_DIFF
    echo "$e1 $e2" | awk -v t="$tree" '{ printf "  => %s: one Edit checkpoint %.1f ms; first checkpoint of a task %.1f ms\n", t, $2 - $1, 2 * $1 - $2 }'
    compare "true round, ckpt on ($tree): A=true B=none" "$tree" "$URL_TRUE" "" "$URL_NONE" ""
    compare "true round, ckpt off ($tree): A=true B=none" "$tree" "$URL_TRUE" "--no-checkpoints" "$URL_NONE" "--no-checkpoints"
    compare "none, ckpt on/off ($tree)" "$tree" "$URL_NONE" "" "$URL_NONE" "--no-checkpoints"
    if [ "${MODE:-}" != quick ]; then
        compare "first session ($tree)" "$tree" "$URL_FIX" "" "$URL_FIX" "--no-checkpoints" fresh
    fi
    home=$BENCH_DIR/home-count
    rm -rf "$home"; one_run "$tree" "$URL_NONE" "$home" > /dev/null # the shadow exists
    gits "git: none ($tree)" "$tree" "$URL_NONE" "$home"
    gits "git: true ($tree)" "$tree" "$URL_TRUE" "$home"
    gits "git: E1 ($tree)" "$tree" "$URL_EDIT" "$home"
    gits "git: E2 ($tree)" "$tree" "$URL_EDIT2" "$home"
    gits "git: 5-turn fix ($tree)" "$tree" "$URL_FIX" "$home"
    rm -rf "$home"
    gits "git: first session ($tree)" "$tree" "$URL_FIX" "$home"
    # The copy of borrowed objects across short sessions of a new shadow:
    # started once, completed by the next session, then never again.
    rm -rf "$home"
    for n in 1 2 3; do
        gits "git: E1, session $n of a new shadow ($tree)" "$tree" "$URL_EDIT" "$home"
    done
    rm -rf "$home"
done
if [ "${MODE:-}" != quick ]; then
    grep_vs_rg big
fi
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
