# hrbench check library (bash).  Verifiers do:  source /tests/checks.sh
#
# Functions follow Table 7 of the depth paper (Appendix F):
#
#   expect_ok       NAME -- CMD...              CMD exits with status 0
#   expect_out      NAME PATTERN -- CMD...      a line of CMD's output matches PATTERN (any exit status)
#   expect_no_out   NAME PATTERN -- CMD...      CMD exits 0 and no output line matches PATTERN
#   expect_fail     NAME PATTERN -- CMD...      CMD fails and its output matches PATTERN ('' = any output)
#   expect_eq       NAME ACTUAL EXPECTED [KIND] equal as KIND: text (default) int num[:TOL] version
#                                               bool set seq exact
#   expect_file     NAME PATH                   PATH is a non-empty file or a directory
#   expect_port     NAME HOST PORT              a TCP connection to HOST:PORT succeeds
#   expect_proc     NAME PROGRAM                a process runs PROGRAM (any path/args, direct or via
#                                               an interpreter such as python3 / bash / env / timeout)
#   expect_proc_arg NAME PROGRAM ARG...         such a process has every ARG on its command line
#   pass NAME  /  fail NAME REASON              record a result the script decides itself
#   finish                                      MUST be the last line of test.sh: empties
#                                               ${HRBENCH_LOGS:-/logs}/verifier, then writes reward.txt
#                                               = 1 iff at least one check ran and every check passed
#   subreward       NAME VALUE                  (extension) a Harbor sub-reward kept beside the reward:
#                                               with any recorded, finish writes reward.json =
#                                               {"reward": R, NAME: VALUE, ...} instead of reward.txt
#                                               (R as above). NAME: 1-64 of [A-Za-z0-9_.-], not
#                                               `reward`; VALUE: a decimal in [0, 1]; a later VALUE
#                                               of a NAME wins. A bad NAME or VALUE is a failed check.
#   untrusted CMD...                            run code the agent wrote (see "Agent code" below); also
#                                               as the first word after `--`: expect_ok n -- untrusted ...
# Readers (print a value on stdout; print nothing and return 1 when it is missing):
#   field FILE KEY                              value of KEY in a `name: value` / `name=value` file
#                                               (INI sections allowed: KEY or SECTION.KEY) or JSON
#                                               (top-level key, or dotted path a.b.0.c); JSON lists
#                                               print one item per line
#   column FILE NAME:POS                        a column of a table, one value per line
#   cell FILE KEYNAME:POS KEYVALUE NAME:POS     column NAME of the first row whose KEYNAME is KEYVALUE
#   rows FILE [NAME:POS]                        the number of data rows
#   table FILE                                  (extension) the table as TSV, header first, so that
#                                               several readers can share one parse:
#                                               T="$(table out.json)"; column - id <<<"$T"
#   proc_start PROGRAM                          start time (epoch seconds) of the newest such process
#
# CMD is an argv (`expect_ok n -- python3 cli.py list`); a single argument after `--` is run with
# `bash -c` (`expect_ok n -- 'cut -d, -f1 a.csv | sort -u'`).  stdin of CMD is /dev/null, stdout and
# stderr are both matched.  Every command runs under `timeout 120` (HRBENCH_CHECK_TIMEOUT overrides).
# FILE may be `-` (stdin) or a process substitution `<(cmd)`.
#
# Comparison: letter case, runs of blanks and blanks around `:` and `=` are ignored in patterns and
# outputs (PATTERN is an extended regex, matched case-insensitively; an invalid regex is matched as a
# fixed string).  Key and column names ignore case and treat `-`, `_` and spaces alike.  Values lose
# surrounding blanks and quotes.  int/num/version compare the first number / dotted version in each
# value (5.7.21-log == 5.7.21); num uses a relative tolerance of 1e-6 or `num:TOL` absolute.  bool
# maps yes/true/pass/ok/on/1/y/enabled to true and their opposites to false.  set/seq split lists on
# newlines, commas or semicolons (else on blanks; surrounding [] removed) and compare normalised items
# regardless of order and repeats (set) or in order (seq).  An empty EXPECTED value fails, except that
# two empty sets are equal.  Readers accept a missing header line (then POS is used), tabs, commas
# (with "quoted, fields"), | tables (markdown separators ignored), aligned columns (split on blanks)
# and JSON (an array of objects, or an object holding one).
#
# No `set -e` here: a failing check never aborts the script.  A script that stops before its last
# line (`finish`) leaves no reward, which hrbench scores as 0.
#
# Agent code (verifier integrity, docs/tasks-verifiers.md).  Anything the agent wrote or could have
# edited -- a script, a program, a file that is sourced -- runs ONLY through `untrusted`, never
# directly: the verifier itself can write the reward, so code run by it directly could forge one.
# `untrusted CMD...` runs CMD in a nested bubblewrap sandbox whose whole root is a read-only view of
# the verifier's, except the workspace (the cwd at `source` time, or HRBENCH_WORKDIR) and TMPDIR
# (/tmp), which stay writable so that CMD can read and write the files the verifier prepares.  The
# log directory, the tests directory and this library's private directory (check results, HOME)
# are hidden under empty tmpfs mounts; CMD gets its own pid namespace (it cannot see or signal the
# verifier, and nothing it starts survives it: --unshare-pid --die-with-parent), no capabilities
# (--cap-drop ALL) and a new session, with a fresh /proc.  Variants, the first that starts wins:
# plain (bwrap itself adds a user namespace when the verifier is unprivileged), then an explicit
# --unshare-user, then --unshare-user with an empty /proc (for kernels that refuse the proc mount).
# If no nested sandbox can be made, CMD is not run at all and `untrusted` fails (exit 126): agent
# code never runs unconfined.
# Files under /tmp may be rewritten by agent code: compute expected values from /tests (pristine
# copies of the task's inputs, or precomputed values) before or independently of running it.
#
# The verifier's own environment is not trusted either: PATH is fixed, shell functions imported
# from the environment are dropped and interpreter hooks (BASH_ENV, PYTHONPATH, LD_PRELOAD, ...)
# are unset when this library is sourced.

# Nothing inherited may redefine what the checks run.
# (compgen fails when there is none: then no subshell is started to list them)
if compgen -A function >/dev/null 2>&1; then for _hrb_f in $(compgen -A function); do unset -f "$_hrb_f"; done; fi
unset _hrb_f BASH_ENV ENV CDPATH PYTHONPATH PYTHONHOME PYTHONSTARTUP PYTHONUSERBASE \
    PYTHONINSPECT LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT PERL5LIB PERL5OPT RUBYOPT NODE_OPTIONS TAR_OPTIONS
[ -n "${GLOBIGNORE+set}" ] && unset GLOBIGNORE  # only when set: unsetting it also turns dotglob off
unalias -a 2>/dev/null
export PATH=/usr/bin:/bin:/usr/sbin:/sbin PYTHONNOUSERSITE=1 PYTHONSAFEPATH=1

_HRB_NPASS=0
_HRB_NFAIL=0
_HRB_TIMEOUT="${HRBENCH_CHECK_TIMEOUT:-120}"
_HRB_KILL_AFTER=5  # seconds timeout(1) waits after TERM before it sends KILL (`timeout -k`)
_HRB_LOGROOT="${HRBENCH_LOGS:-/logs}"
_HRB_LOGDIR="$_HRB_LOGROOT/verifier"
# Builtins wherever a builtin can do it, from here to `finish`: every verifier runs this code, and
# each process it starts costs milliseconds inside the sandbox (benchmarks/verifier_cost.py).
case "${BASH_SOURCE[0]}" in
    */*) _HRB_TESTS="${BASH_SOURCE[0]%/*}"; _HRB_TESTS="${_HRB_TESTS:-/}" ;;  # dirname without a process
    *) _HRB_TESTS=. ;;
esac
_hrb_physical() { # DIR -> 0 with _HRB_PHYS = DIR when it is an absolute path to a directory and no
    # component of it is a symlink, `.` or `..` (then it is its own physical path); 1 otherwise
    local rest="${1#/}" part node=""
    [[ "$1" == /* ]] || return 1
    while [ -n "$rest" ]; do
        part="${rest%%/*}"
        if [ "$part" = "$rest" ]; then rest=""; else rest="${rest#*/}"; fi
        case "$part" in ""|.|..) return 1 ;; esac
        node+="/$part"
        [ -L "$node" ] && return 1
    done
    _HRB_PHYS="${node:-/}"
    [ -d "$_HRB_PHYS" ]
}
# The physical path (what `untrusted` hides): checked component by component in this shell, and only
# where that cannot tell (a relative path, a symlink on the way) asked of `pwd -P` in a subshell.
if _hrb_physical "$_HRB_TESTS"; then _HRB_TESTS="$_HRB_PHYS"; else _HRB_TESTS="$(cd "$_HRB_TESTS" && pwd -P)"; fi
unset _HRB_PHYS
_HRB_WORK="${HRBENCH_WORKDIR:-$PWD}"

_hrb_clear_rewards() { # empty the log directory: no reward file survives from before
    local -a entries opts=()
    local o
    [ -d "$_HRB_LOGDIR" ] || mkdir -p "$_HRB_LOGDIR" 2>/dev/null
    # A symlinked log directory is left alone, as `find` (no -H) did; a GLOBIGNORE the verifier set
    # would hide entries from a glob, so then `find` lists them.
    [ -L "$_HRB_LOGDIR" ] && return 0
    if [ -n "${GLOBIGNORE+set}" ]; then
        find "$_HRB_LOGDIR" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + 2>/dev/null
        return 0
    fi
    # A glob lists the entries (dot files too, never . or ..); the verifier's own shell options are
    # restored afterwards: `local -` for set -f, by hand for the shopt ones.
    local -
    set +f
    for o in nullglob dotglob failglob; do shopt -q "$o" && opts+=("$o"); done
    shopt -s nullglob dotglob
    shopt -u failglob
    entries=("$_HRB_LOGDIR"/*)
    shopt -u nullglob dotglob
    [ ${#opts[@]} -gt 0 ] && shopt -s "${opts[@]}"
    [ ${#entries[@]} -gt 0 ] && rm -rf -- "${entries[@]}" 2>/dev/null
    return 0
}
# A stale reward from an earlier run must never survive a script that stops early.
_hrb_clear_rewards
# Results are also appended to a file so that checks run in subshells / pipelines still count.  It
# lives in a private directory that agent code run through `untrusted` cannot see; so does HOME, so
# that agent code cannot plant configuration (~/.local site hooks, rc files) the verifier would read.
# The directory is in the log root (hidden whole from agent code, so that it cannot even learn the
# random name to aim a symlink at), else in TMPDIR (its mount point visible, its content not).
# Its name has 64 random bits from $SRANDOM, which bash draws from getrandom(2) where the kernel
# has it (the kernel's CSPRNG, not a seeded generator): not derivable from anything agent code can see.
# One `mkdir -m 700` makes it and HOME inside it (mode 700 whatever the umask); a name that exists
# already is never used: another is drawn (at most 4 per place).
_hrb_private_dir() { # ROOT -> 0 with _HRB_PRIV = a new private directory in ROOT (HOME inside it)
    local root="$1" name try
    [ -d "$root" ] || return 1
    for try in 1 2 3 4; do
        printf -v name '%s/.hrbench-private.%08x%08x' "$root" "$SRANDOM" "$SRANDOM"
        [ -e "$name" ] || [ -L "$name" ] && continue
        if mkdir -m 700 -- "$name" "$name/home" 2>/dev/null; then
            _HRB_PRIV="$name"; export HOME="$name/home"; return 0
        fi
        # any failure (the name taken since the test, or HOME not made): another name, never a
        # directory this mkdir did not make whole
    done
    return 1
}
_HRB_PRIV=""
_HRB_RESULTS=""
_hrb_a=${SRANDOM-} _hrb_b=${SRANDOM-}
if [[ "$_hrb_a" =~ ^[0-9]+$ && "$_hrb_a" != "$_hrb_b" ]]; then  # SRANDOM works (bash >= 5.1)
    _hrb_private_dir "$_HRB_LOGROOT" || _hrb_private_dir "${TMPDIR:-/tmp}"
else  # an older bash: mktemp's name, and the directory made private by hand
    _HRB_PRIV="$(mktemp -d "$_HRB_LOGROOT/.hrbench-private.XXXXXX" 2>/dev/null)" \
        || _HRB_PRIV="$(mktemp -d "${TMPDIR:-/tmp}/.hrbench-private.XXXXXX" 2>/dev/null)" || _HRB_PRIV=""
    if [ -n "$_HRB_PRIV" ]; then
        chmod 700 "$_HRB_PRIV"
        mkdir -p "$_HRB_PRIV/home" && export HOME="$_HRB_PRIV/home"
    fi
fi
unset _hrb_a _hrb_b
if [ -n "$_HRB_PRIV" ]; then
    _HRB_RESULTS="$_HRB_PRIV/results"
    : >"$_HRB_RESULTS"
fi

_hrb_short() { # TEXT [VAR] -> one line, at most 200 chars, on stdout or into VAR (no subshell)
    local s="${1//$'\n'/ | }"
    s="${s//$'\r'/}"
    [ "${#s}" -gt 200 ] && s="${s:0:197}..."
    if [ -n "${2:-}" ]; then printf -v "$2" '%s' "$s"; else printf '%s' "$s"; fi
}

# A check's name is one line: a name made from agent output (a file name, a printed line) must not
# add lines to the results file, where "S name value" lines become reward.json's keys.
pass() {
    local name="${1//[$'\n\r']/ }"
    printf 'PASS %s\n' "$name"
    _HRB_NPASS=$((_HRB_NPASS + 1))
    [ -n "$_HRB_RESULTS" ] && printf 'P %s\n' "$name" >>"$_HRB_RESULTS"
    return 0
}

fail() {
    local name="${1//[$'\n\r']/ }" why
    _hrb_short "${2:-failed}" why
    printf 'FAIL %s: %s\n' "$name" "$why"
    _HRB_NFAIL=$((_HRB_NFAIL + 1))
    [ -n "$_HRB_RESULTS" ] && printf 'F %s\n' "$name" >>"$_HRB_RESULTS"
    return 1
}

_HRB_SUBS=""  # "NAME VALUE" lines, for a verifier without a private directory (subshells then don't count)
_HRB_SUB_NAME_RE='^[A-Za-z0-9_.-]{1,64}$'  # what subreward accepts, checked again when finish reads them
_HRB_SUB_VALUE_RE='^(0(\.[0-9]+)?|1(\.0+)?)$'

subreward() { # NAME VALUE -> a sub-reward written into reward.json by finish
    local name="$1" value="$2"
    if ! [[ "$name" =~ $_HRB_SUB_NAME_RE ]] || [ "$name" = reward ]; then
        fail "subreward_name" "subreward: name '$(_hrb_short "$name")' must be 1-64 of [A-Za-z0-9_.-] and not 'reward'"
        return 1
    fi
    if ! [[ "$value" =~ $_HRB_SUB_VALUE_RE ]]; then
        fail "subreward_$name" "subreward: value '$(_hrb_short "$value")' of $name is not a decimal in [0, 1]"
        return 1
    fi
    if [ -n "$_HRB_RESULTS" ]; then printf 'S %s %s\n' "$name" "$value" >>"$_HRB_RESULTS"
    else _HRB_SUBS+="$name $value"$'\n'; fi
    return 0
}

_HRB_SUB_RE=$'^[ \t]*([^ \t]+)[ \t]+([^ \t]+)[ \t]*$'  # "NAME VALUE", blanks around (awk's NF == 2)

_hrb_sub_add() { # "NAME VALUE" -> into finish's subs/order/value: the last value wins, first order kept
    [ -n "$1" ] && subs=1
    [[ "$1" =~ $_HRB_SUB_RE ]] || return 0
    local n="${BASH_REMATCH[1]}" v="${BASH_REMATCH[2]}"
    # only what subreward would have written reaches reward.json, whatever else got into the file
    [[ "$n" =~ $_HRB_SUB_NAME_RE && "$n" != reward && "$v" =~ $_HRB_SUB_VALUE_RE ]] || return 0
    [ -n "${value["$n"]+set}" ] || order+=("$n")
    value["$n"]="$v"
}

finish() {
    local np=$_HRB_NPASS nf=$_HRB_NFAIL reward=0 subs="" line json name
    local -a order=()
    local -A value=()
    if [ -n "$_HRB_RESULTS" ] && [ -f "$_HRB_RESULTS" ]; then
        # one pass over the results (lines from subshells included): P and F counted, S kept
        np=0 nf=0
        while IFS= read -r line || [ -n "$line" ]; do
            case "$line" in
                "P "*) np=$((np + 1)) ;;
                "F "*) nf=$((nf + 1)) ;;
                "S "*) _hrb_sub_add "${line#S }" ;;
            esac
        done <"$_HRB_RESULTS"
    else
        while IFS= read -r line; do _hrb_sub_add "$line"; done <<<"$_HRB_SUBS"
    fi
    if [ "$np" -ge 1 ] && [ "$nf" -eq 0 ]; then reward=1; fi
    [ -n "$_HRB_PRIV" ] && rm -rf -- "$_HRB_PRIV"
    # Written last, after removing every other file (a reward.json would take precedence), and
    # renamed into place so that a reader never sees half a file. Names and values were checked by
    # subreward; the last value of a name wins, names keep their first order.
    _hrb_clear_rewards
    if [ -n "$subs" ]; then
        json="{\"reward\": $reward"
        for name in "${order[@]}"; do json+=", \"$name\": ${value["$name"]}"; done
        printf '%s}\n' "$json" >"$_HRB_LOGDIR/.reward.tmp" && mv -f "$_HRB_LOGDIR/.reward.tmp" "$_HRB_LOGDIR/reward.json"
    else
        printf '%s\n' "$reward" >"$_HRB_LOGDIR/.reward.tmp" && mv -f "$_HRB_LOGDIR/.reward.tmp" "$_HRB_LOGDIR/reward.txt"
    fi
    printf 'checks: %s passed, %s failed -> reward %s\n' "$np" "$nf" "$reward"
    return 0
}

# ---------------------------------------------------------------- agent code
_HRB_SANDBOX=""   # the nested-sandbox variant that works here (probed once): plain | userns | userns-noproc

_hrb_sandbox_argv() { # VARIANT -> _HRB_ARGV: bwrap argv up to (not including) the command
    local v="$1" d
    _HRB_ARGV=(/usr/bin/bwrap --ro-bind / /)
    for d in "${TMPDIR:-/tmp}" "$_HRB_WORK"; do
        # never "/": that would make the whole view writable again
        [ -d "$d" ] && [ "$(cd "$d" && pwd -P)" != / ] && _HRB_ARGV+=(--bind "$d" "$d")
    done
    for d in "$_HRB_LOGROOT" "$_HRB_TESTS" "$_HRB_PRIV"; do
        case "$d" in "$_HRB_LOGROOT"/*) continue ;; esac  # inside the hidden log root: no mount point for it
        [ -n "$d" ] && [ "$d" != / ] && [ -d "$d" ] && _HRB_ARGV+=(--tmpfs "$d")
    done
    _HRB_ARGV+=(--dev /dev --unshare-pid --die-with-parent --new-session --cap-drop ALL
        --setenv HOME "${TMPDIR:-/tmp}" --unsetenv PYTHONSAFEPATH --unsetenv PYTHONNOUSERSITE)
    case "$v" in
        plain) _HRB_ARGV+=(--proc /proc) ;;
        userns) _HRB_ARGV+=(--unshare-user --proc /proc) ;;
        userns-noproc) _HRB_ARGV+=(--unshare-user --tmpfs /proc) ;;
    esac
    _HRB_ARGV+=(--)
}

_hrb_sandbox_probe() { # sets _HRB_SANDBOX to the first variant that starts, or "none"
    local v
    [ -n "$_HRB_SANDBOX" ] && return 0
    # `untrusted` mostly runs in $(...) subshells: the answer is kept in the private directory
    if [ -n "$_HRB_PRIV" ] && [ -s "$_HRB_PRIV/sandbox" ]; then IFS= read -r _HRB_SANDBOX <"$_HRB_PRIV/sandbox"; return 0; fi
    _HRB_SANDBOX=none
    if [ -x /usr/bin/bwrap ]; then
        for v in plain userns userns-noproc; do
            _hrb_sandbox_argv "$v"
            if "${_HRB_ARGV[@]}" /bin/true </dev/null >/dev/null 2>&1; then _HRB_SANDBOX="$v"; break; fi
        done
    fi
    [ -n "$_HRB_PRIV" ] && printf '%s\n' "$_HRB_SANDBOX" >"$_HRB_PRIV/sandbox"
    return 0
}

untrusted() { # CMD... -> run agent code without access to the reward, the tests or the results
    [ $# -eq 0 ] && { echo "untrusted: no command given" >&2; return 127; }
    [ $# -eq 1 ] && set -- /bin/bash -c "$1"
    _hrb_sandbox_probe
    if [ "$_HRB_SANDBOX" = none ]; then
        echo "untrusted: cannot start a nested bubblewrap sandbox (/usr/bin/bwrap); agent code not run" >&2
        return 126
    fi
    _hrb_sandbox_argv "$_HRB_SANDBOX"
    /usr/bin/timeout -k "$_HRB_KILL_AFTER" "$_HRB_TIMEOUT" "${_HRB_ARGV[@]}" "$@"
}

# ---------------------------------------------------------------- running commands
_hrb_run() { # CMD... -> sets _HRB_OUT (stdout+stderr), _HRB_RC and _HRB_STARTED
    [ "$1" = "--" ] && shift
    _HRB_STARTED=$SECONDS
    if [ $# -eq 0 ]; then _HRB_OUT="no command given"; _HRB_RC=127; return; fi
    if [ "$1" = untrusted ]; then
        shift
        _HRB_OUT="$(untrusted "$@" </dev/null 2>&1)"
        _HRB_RC=$?
        return
    fi
    if [ $# -eq 1 ]; then set -- bash -c "$1"; fi
    _HRB_OUT="$(timeout -k "$_HRB_KILL_AFTER" "$_HRB_TIMEOUT" "$@" </dev/null 2>&1)"
    _HRB_RC=$?
}

_hrb_timed_out() { # -> 0 when the check's timeout ended the last command (`_hrb_run` sets _HRB_STARTED)
    # timeout(1) exits 124, or 137 when the command ignored TERM and was killed _HRB_KILL_AFTER s later (at
    # least that less one by `SECONDS`, whole seconds); a 137 before that is a SIGKILL from elsewhere (the
    # memory bound's OOM killer), not a timeout
    [ "$_HRB_RC" -eq 124 ] && return 0
    local limit="${_HRB_TIMEOUT%.*}"
    case "$limit" in ''|*[!0-9]*) limit=0 ;; esac  # a timeout with a unit (2m): any late SIGKILL is its
    [ "$_HRB_RC" -eq 137 ] && [ $((SECONDS - _HRB_STARTED)) -ge $((10#$limit + _HRB_KILL_AFTER - 1)) ]
}

_hrb_rcmsg() {
    if _hrb_timed_out; then printf 'timed out after %ss' "$_HRB_TIMEOUT"
    elif [ "$_HRB_RC" -eq 137 ]; then printf 'killed by SIGKILL (exit status 137; the memory bound?)'
    else printf 'exit status %s' "$_HRB_RC"; fi
}

_hrb_normlines() { # stdin -> normalised lines (blanks collapsed, no blanks around : and =)
    sed -E 's/[[:space:]]+/ /g; s/ ?([:=]) ?/\1/g; s/^ //; s/ $//'
}

_hrb_match() { # PATTERN TEXT -> 0 if a normalised line of TEXT matches PATTERN
    local pat rc
    pat="$(printf '%s\n' "$1" | _hrb_normlines)"
    [ -z "$pat" ] && return 0
    printf '%s\n' "$2" | _hrb_normlines | grep -Eiq -- "$pat" 2>/dev/null
    rc=$?
    if [ $rc -eq 2 ]; then
        printf '%s\n' "$2" | _hrb_normlines | grep -Fiq -- "$pat"
        rc=$?
    fi
    return $rc
}

expect_ok() {
    local name="$1"; shift
    _hrb_run "$@"
    if [ "$_HRB_RC" -eq 0 ]; then pass "$name"
    else fail "$name" "$(_hrb_rcmsg); output: $_HRB_OUT"; fi
}

expect_out() {
    local name="$1" pat="$2"; shift 2
    _hrb_run "$@"
    if _hrb_match "$pat" "$_HRB_OUT"; then pass "$name"
    else fail "$name" "no output line matches '$pat' ($(_hrb_rcmsg)); output: $_HRB_OUT"; fi
}

expect_no_out() {
    local name="$1" pat="$2"; shift 2
    _hrb_run "$@"
    if [ "$_HRB_RC" -ne 0 ]; then fail "$name" "$(_hrb_rcmsg); output: $_HRB_OUT"
    elif [ -n "$pat" ] && _hrb_match "$pat" "$_HRB_OUT"; then
        fail "$name" "output matches '$pat': $_HRB_OUT"
    else pass "$name"; fi
}

expect_fail() {
    local name="$1" pat="$2"; shift 2
    _hrb_run "$@"
    if [ "$_HRB_RC" -eq 0 ]; then fail "$name" "command succeeded but must fail; output: $_HRB_OUT"
    elif _hrb_timed_out; then fail "$name" "$(_hrb_rcmsg)"
    elif _hrb_match "$pat" "$_HRB_OUT"; then pass "$name"
    else fail "$name" "failed ($(_hrb_rcmsg)) but no output line matches '$pat'; output: $_HRB_OUT"; fi
}

expect_file() {
    local name="$1" path="$2"
    if [ -z "$path" ]; then fail "$name" "no path given"
    elif [ -d "$path" ]; then pass "$name"
    elif [ -f "$path" ] && [ -s "$path" ]; then pass "$name"
    elif [ -f "$path" ]; then fail "$name" "$path is empty"
    elif [ -e "$path" ]; then fail "$name" "$path is not a regular file or directory"
    else fail "$name" "$path does not exist"; fi
}

expect_port() {
    local name="$1" host="$2" port="$3"
    if timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$host" "$port" 2>/dev/null; then pass "$name"
    else fail "$name" "no TCP connection to $host:$port"; fi
}

# ---------------------------------------------------------------- comparing values
# Text helpers shared by the awk programs below (prepended to each: awk has no includes).
_HRB_AWK_LIB='
function trim(s) { sub(/^[ \t\r\n]+/, "", s); sub(/[ \t\r\n]+$/, "", s); return s }
function clean(s,  f, l) {
    s = trim(s)
    if (length(s) >= 2) {
        f = substr(s, 1, 1); l = substr(s, length(s), 1)
        if ((f == "\"" && l == "\"") || (f == "\047" && l == "\047")) s = trim(substr(s, 2, length(s) - 2))
    }
    return s
}
function nk(s) { s = tolower(trim(s)); gsub(/[-_ \t]+/, "_", s); sub(/^_+/, "", s); sub(/_+$/, "", s); return s }
'

_HRB_CMP_AWK='
function nt(s) {
    s = tolower(clean(s)); gsub(/[ \t\r\n]+/, " ", s)
    gsub(/ ?: ?/, ":", s); gsub(/ ?= ?/, "=", s)
    return trim(s)
}
function firstnum(s) {
    if (match(s, /[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?/)) return substr(s, RSTART, RLENGTH)
    return ""
}
function firstver(s) {
    if (match(s, /[0-9]+(\.[0-9]+)*/)) return substr(s, RSTART, RLENGTH)
    return ""
}
function boolv(s) {
    s = nt(s)
    if (s ~ /^(yes|y|true|t|pass|passed|ok|on|1|enabled|enable)$/) return "true"
    if (s ~ /^(no|n|false|f|fail|failed|off|0|disabled|disable)$/) return "false"
    return ""
}
function items(s, arr,   n, m, i, parts, it) {
    s = clean(s)
    if (substr(s, 1, 1) == "[" && substr(s, length(s), 1) == "]") s = substr(s, 2, length(s) - 2)
    if (s ~ /[\n,;]/) m = split(s, parts, /[\n,;]/)
    else m = split(s, parts, /[ \t\r]+/)
    n = 0
    for (i = 1; i <= m; i++) { it = nt(parts[i]); if (it != "") arr[++n] = it }
    return n
}
function sortarr(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; j = i - 1; while (j >= 1 && a[j] > t) { a[j + 1] = a[j]; j-- } a[j + 1] = t }
}
function uniq(a, n, b,   i, m) {
    m = 0
    for (i = 1; i <= n; i++) if (i == 1 || a[i] != a[i - 1]) b[++m] = a[i]
    return m
}
function abs(x) { return x < 0 ? -x : x }
BEGIN {
    A = ENVIRON["_HRB_A"]; B = ENVIRON["_HRB_B"]; K = tolower(ENVIRON["_HRB_K"])
    if (K == "") K = "text"
    tol = ""
    if (K ~ /^num:/) { tol = substr(K, 5) + 0; K = "num" }
    if (K == "set") {
        na = items(A, xa); nb = items(B, xb)
        if (nb == 0 && na == 0) exit 0
        if (nb == 0) { print "expected value is empty"; exit 1 }
        sortarr(xa, na); sortarr(xb, nb); ua = uniq(xa, na, ya); ub = uniq(xb, nb, yb)
        if (ua != ub) { print "sets differ in size (" ua " vs " ub " items)"; exit 1 }
        for (i = 1; i <= ua; i++) if (ya[i] != yb[i]) { print "sets differ (e.g. \047" ya[i] "\047 vs \047" yb[i] "\047)"; exit 1 }
        exit 0
    }
    if (K == "exact") {
        if (B == "") { print "expected value is empty"; exit 1 }
        exit (A == B) ? 0 : 1
    }
    if (clean(B) == "") { print "expected value is empty"; exit 1 }
    if (K == "text") exit (nt(A) == nt(B)) ? 0 : 1
    if (K == "seq") {
        na = items(A, xa); nb = items(B, xb)
        if (na != nb) { print "sequences differ in length (" na " vs " nb " items)"; exit 1 }
        for (i = 1; i <= na; i++) if (xa[i] != xb[i]) { print "item " i " differs: \047" xa[i] "\047 vs \047" xb[i] "\047"; exit 1 }
        exit 0
    }
    if (K == "int" || K == "num") {
        a = firstnum(A); b = firstnum(B)
        if (b == "") { print "expected value has no number"; exit 1 }
        if (a == "") { print "actual value has no number"; exit 1 }
        a += 0; b += 0
        if (K == "int") exit (a == b) ? 0 : 1
        if (tol != "") exit (abs(a - b) <= tol + 1e-12) ? 0 : 1
        m = abs(a) > abs(b) ? abs(a) : abs(b); if (m < 1) m = 1
        exit (abs(a - b) <= 1e-6 * m) ? 0 : 1
    }
    if (K == "version") {
        a = firstver(A); b = firstver(B)
        if (b == "") { print "expected value has no version"; exit 1 }
        if (a == "") { print "actual value has no version"; exit 1 }
        na = split(a, pa, "."); nb = split(b, pb, "."); n = na > nb ? na : nb
        for (i = 1; i <= n; i++) if ((pa[i] + 0) != (pb[i] + 0)) exit 1
        exit 0
    }
    if (K == "bool") {
        a = boolv(A); b = boolv(B)
        if (b == "") { print "expected value is not a boolean"; exit 1 }
        if (a == "") { print "actual value is not a boolean"; exit 1 }
        exit (a == b) ? 0 : 1
    }
    print "unknown kind " K; exit 2
}'

_hrb_not_a_number() { # TEXT -> 0 if no awk reads TEXT as a number: blanks inside it, or a character
    # no numeral has (awk compares two values that both look numeric as numbers, not as text)
    local s="$1"
    s="${s#"${s%%[![:space:]]*}"}"
    s="${s%"${s##*[![:space:]]}"}"
    [[ "$s" == *[!0-9A-Za-z.+-]* ]]
}

_hrb_eq_here() { # KIND ACTUAL EXPECTED -> 0 equal, 1 different, 2 for the awk to decide
    # What is decided here is what the awk program below would decide, whichever awk it is; the rest
    # (and every message but the plain "got ..., expected ...") is the awk's. A process per comparison
    # was most of a transduction verifier's cost (docs/performance.md).
    case "$1" in
        exact)
            [ -n "$3" ] || return 2
            if [ "$2" = "$3" ]; then
                [[ "$3" =~ ^[[:space:]]*[-+]?[nN][aA][nN] ]] && return 2  # NaN: never equal to itself as a number
                return 0
            fi
            if _hrb_not_a_number "$2" || _hrb_not_a_number "$3"; then return 1; fi ;;
        text)  # equal text normalises equally; an expected value with nothing but blanks and quotes is empty
            [ "$2" = "$3" ] && [[ "$3" == *[![:space:]\"\']* ]] && return 0 ;;
        int)  # plain decimal integers a double holds exactly
            if [[ "$2" =~ ^[0-9]{1,15}$ && "$3" =~ ^[0-9]{1,15}$ ]]; then
                (( 10#$2 == 10#$3 )) && return 0
                return 1
            fi ;;
    esac
    return 2
}

expect_eq() {
    local name="$1" actual="$2" expected="$3" kind="${4:-text}" why="" rc
    _hrb_eq_here "$kind" "$actual" "$expected"
    rc=$?
    if [ $rc -eq 2 ]; then
        why="$(_HRB_A="$actual" _HRB_B="$expected" _HRB_K="$kind" awk "$_HRB_AWK_LIB$_HRB_CMP_AWK" </dev/null)"
        rc=$?
    fi
    if [ $rc -eq 0 ]; then pass "$name"
    else
        [ -n "$why" ] && why="$why; "
        fail "$name" "${why}got '$(_hrb_short "$actual")', expected '$(_hrb_short "$expected")' ($kind)"
    fi
}

# ---------------------------------------------------------------- processes
_hrb_is_wrapper() {
    case "$1" in
        python|python[0-9]*|pypy*|bash|sh|dash|zsh|ksh|perl|perl[0-9]*|ruby*|node|nodejs|php*|java|\
        env|nohup|timeout|setsid|stdbuf|nice|ionice|exec|sudo|runuser|chronic|flock|tini|dumb-init|uv|uvx|xargs)
            return 0 ;;
    esac
    return 1
}

_hrb_proc_match() { # PROGRAM ARGV... -> 0 if this argv runs PROGRAM
    local prog="$1" a b; shift
    while [ $# -gt 0 ]; do
        a="$1"; shift
        b="${a##*/}"
        if [ "$b" = "$prog" ] || [ "${b%.*}" = "$prog" ] || [ "$a" = "$prog" ]; then return 0; fi
        _hrb_is_wrapper "$b" || return 1
        # skip the wrapper's options, env assignments and numeric arguments
        while [ $# -gt 0 ]; do
            case "$1" in
                -m) shift; [ "${1:-}" = "$prog" ] && return 0; return 1 ;;
                -c|-e|--eval) return 1 ;;
                -*|*=*|[0-9]*) shift ;;
                *) break ;;
            esac
        done
    done
    return 1
}

_hrb_find_procs() { # PROGRAM -> pids (one per line) of processes running PROGRAM
    local prog="$1" d pid
    local -a argv
    for d in /proc/[0-9]*; do
        pid="${d#/proc/}"
        [ "$pid" = "$$" ] && continue
        [ "$pid" = "$BASHPID" ] && continue
        argv=()
        mapfile -d "" -t argv 2>/dev/null <"$d/cmdline" || continue
        [ ${#argv[@]} -eq 0 ] && continue
        if _hrb_proc_match "$prog" "${argv[@]}"; then printf '%s\n' "$pid"; fi
    done
}

expect_proc() {
    local name="$1" prog="$2"
    if [ -n "$(_hrb_find_procs "$prog")" ]; then pass "$name"
    else fail "$name" "no process runs $prog"; fi
}

expect_proc_arg() {
    local name="$1" prog="$2" pid line a ok; shift 2
    local -a argv
    for pid in $(_hrb_find_procs "$prog"); do
        argv=()
        mapfile -d "" -t argv 2>/dev/null <"/proc/$pid/cmdline" || continue
        line=" ${argv[*]} "
        ok=1
        for a in "$@"; do
            case "$line" in *"$a"*) ;; *) ok=0; break ;; esac
        done
        if [ $ok -eq 1 ]; then pass "$name"; return 0; fi
    done
    fail "$name" "no process running $prog has arguments: $*"
}

proc_start() { # PROGRAM -> epoch seconds of the newest process running it
    local prog="$1" pid st best="" bestpid="" btime hz rest
    for pid in $(_hrb_find_procs "$prog"); do
        rest="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        rest="${rest##*) }"
        st="$(printf '%s\n' "$rest" | awk '{print $20}')"
        if [ -z "$best" ] || [ "$st" -gt "$best" ]; then best="$st"; bestpid="$pid"; fi
    done
    [ -z "$best" ] && return 1
    btime="$(awk '/^btime/ {print $2}' /proc/stat)"
    hz="$(getconf CLK_TCK 2>/dev/null || echo 100)"
    awk -v b="$btime" -v s="$best" -v h="$hz" 'BEGIN { printf "%.2f\n", b + s / h }'
}

# ---------------------------------------------------------------- readers
_hrb_read() { # FILE -> content on stdout ('-' = stdin); 1 if unreadable
    if [ "$1" = "-" ]; then cat; return 0; fi
    [ -r "$1" ] || return 1
    [ -d "$1" ] && return 1
    cat -- "$1" 2>/dev/null
}

_hrb_is_json() { # CONTENT -> 0 if it looks like JSON
    local s="${1#"${1%%[![:space:]]*}"}"
    case "$s" in
        \{*) return 0 ;;
        \[*)
            local first="${s%%$'\n'*}"
            # an INI section header such as [server] is not JSON
            if [[ "$first" =~ ^\[[[:space:]]*[A-Za-z_][A-Za-z0-9_.:\ -]*\][[:space:]]*$ ]]; then return 1; fi
            return 0 ;;
    esac
    return 1
}

_HRB_JSON_PY='
import json, re, sys
def nk(s):
    return re.sub(r"[-_\s]+", "_", str(s).strip().lower()).strip("_")
def fmt(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return str(v)
def cellfmt(v):
    return re.sub(r"[\t\r\n]+", " ", fmt(v))
mode = sys.argv[1]
try:
    data = json.loads(sys.stdin.read())
except Exception:
    sys.exit(3)
if mode == "field":
    key = sys.argv[2]
    def look(o, k):
        if isinstance(o, dict):
            for kk, vv in o.items():
                if nk(kk) == nk(k):
                    return True, vv
        if isinstance(o, list) and k.strip().isdigit() and int(k) < len(o):
            return True, o[int(k)]
        return False, None
    found, v = look(data, key)
    if not found and "." in key:
        o, found = data, True
        for part in key.split("."):
            f, o = look(o, part)
            if not f:
                found = False
                break
        v = o
    if not found:
        sys.exit(1)
    if isinstance(v, list):
        for x in v:
            print(fmt(x))
    else:
        print(fmt(v))
else:  # table -> TSV
    t = data
    if isinstance(t, dict):
        lists = [v for v in t.values() if isinstance(v, list)]
        t = lists[0] if len(lists) == 1 else [t]
    if not isinstance(t, list):
        sys.exit(1)
    if t and all(isinstance(r, dict) for r in t):
        keys = []
        for r in t:
            for k in r:
                if k not in keys:
                    keys.append(k)
        print("\t".join(cellfmt(k) for k in keys))
        for r in t:
            print("\t".join(cellfmt(r.get(k)) for k in keys))
    else:
        for r in t:
            r = r if isinstance(r, list) else [r]
            print("\t".join(cellfmt(x) for x in r))
'

_HRB_FIELD_AWK='
BEGIN { K = nk(ENVIRON["_HRB_K"]); sect = "" }
{
    line = $0; sub(/\r$/, "", line)
    t = trim(line)
    if (t ~ /^\[[^]]*\]$/) { sect = nk(substr(t, 2, length(t) - 2)); next }
    if (t ~ /^(#|;)/) next
    sub(/^export[ \t]+/, "", t)
    c = index(t, ":"); e = index(t, "=")
    p = c; if (p == 0 || (e > 0 && e < p)) p = e
    if (p <= 1) next
    k = nk(substr(t, 1, p - 1)); v = substr(t, p + 1)
    if (k == K || (sect != "" && sect "." k == K)) { print clean(v); found = 1; exit }
}
END { exit found ? 0 : 1 }'

field() { # FILE KEY
    local content out rc
    content="$(_hrb_read "$1")" || return 1
    if _hrb_is_json "$content"; then
        out="$(printf '%s' "$content" | python3 -I -S -c "$_HRB_JSON_PY" field "$2" 2>/dev/null)"
        rc=$?
        if [ $rc -ne 3 ]; then
            [ $rc -eq 0 ] && printf '%s\n' "$out"
            return $rc
        fi
    fi
    printf '%s\n' "$content" | _HRB_K="$2" awk "$_HRB_AWK_LIB$_HRB_FIELD_AWK"
}

_HRB_TSV_AWK='
function splitcsv(line, arr,   n, i, c, cur, inq, L) {
    n = 0; cur = ""; inq = 0; L = length(line)
    for (i = 1; i <= L; i++) {
        c = substr(line, i, 1)
        if (inq) {
            if (c == "\"") { if (substr(line, i + 1, 1) == "\"") { cur = cur "\""; i++ } else inq = 0 }
            else cur = cur c
        } else if (c == "\"" && trim(cur) == "") { inq = 1; cur = "" }
        else if (c == ",") { arr[++n] = cur; cur = "" }
        else cur = cur c
    }
    arr[++n] = cur
    return n
}
{
    line = $0; sub(/\r$/, "", line)
    if (line ~ /^[ \t]*$/) next
    if (line ~ /^[ \t|+:=-]*$/) next
    if (fmt == "") {
        if (index(line, "|")) fmt = "pipe"
        else if (index(line, "\t")) fmt = "tab"
        else if (index(line, ",")) fmt = "csv"
        else fmt = "ws"
    }
    if (fmt == "pipe") {
        sub(/^[ \t]*\|/, "", line); sub(/\|[ \t]*$/, "", line)
        n = split(line, arr, "|")
    } else if (fmt == "tab") n = split(line, arr, "\t")
    else if (fmt == "csv") n = splitcsv(line, arr)
    else n = split(line, arr)
    out = ""
    for (i = 1; i <= n; i++) { v = clean(arr[i]); gsub(/\t/, " ", v); out = out (i > 1 ? "\t" : "") v }
    print out
}'

_HRB_TQ_AWK='
function nt(s) { s = tolower(trim(s)); gsub(/[ \t]+/, " ", s); gsub(/ ?: ?/, ":", s); gsub(/ ?= ?/, "=", s); return s }
function isnum(s) { return s ~ /^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?%?$/ }
function spec(s, which,   p, nm, ps) {   # sets SN[which], SP[which]
    nm = s; ps = 0
    p = match(s, /:[0-9]+$/)
    if (p) { nm = substr(s, 1, p - 1); ps = substr(s, p + 1) + 0 }
    else if (s ~ /^[0-9]+$/) { nm = ""; ps = s + 0 }
    SN[which] = nk(nm); SP[which] = ps
}
function byname(which,   i) {
    if (SN[which] == "") return 0
    for (i = 1; i <= nc[1]; i++) if (nk(C[1, i]) == SN[which]) return i
    return 0
}
function guesshdr(   i, j, anynum) {
    if (nr < 2) return 0
    for (i = 1; i <= nc[1]; i++) if (isnum(C[1, i])) return 0
    for (j = 2; j <= nr; j++) for (i = 1; i <= nc[j]; i++) if (isnum(C[j, i])) return 1
    return 0
}
BEGIN { FS = "\t"; mode = ENVIRON["_HRB_MODE"] }
{ nr++; nc[nr] = NF; for (i = 1; i <= NF; i++) C[nr, i] = $i }
END {
    spec(ENVIRON["_HRB_S1"], 1); spec(ENVIRON["_HRB_S2"], 2)
    hdr = -1
    col1 = byname(1); if (col1) hdr = 1
    if (mode == "cell") { col2 = byname(2); if (col2) hdr = 1 }
    if (mode == "rows" && SN[1] == "" && SP[1] == 0) { print (nr - guesshdr()); exit 0 }
    if (hdr < 0) hdr = guesshdr()
    if (!col1) col1 = SP[1]
    if (mode == "cell" && !col2) col2 = SP[2]
    if (!col1 || (mode == "cell" && !col2)) exit 1
    if (mode == "rows") { print nr - hdr; exit 0 }
    if (mode == "column") { for (j = 1 + hdr; j <= nr; j++) print C[j, col1]; exit 0 }
    want = nt(ENVIRON["_HRB_KV"])
    for (j = 1 + hdr; j <= nr; j++) if (nt(C[j, col1]) == want) { print C[j, col2]; exit 0 }
    exit 1
}'

_hrb_table() { # FILE -> TSV rows on stdout
    local content out rc
    content="$(_hrb_read "$1")" || return 1
    if _hrb_is_json "$content"; then
        out="$(printf '%s' "$content" | python3 -I -S -c "$_HRB_JSON_PY" table 2>/dev/null)"
        rc=$?
        if [ $rc -ne 3 ]; then
            [ $rc -eq 0 ] && [ -n "$out" ] && printf '%s\n' "$out"
            return $rc
        fi
    fi
    printf '%s\n' "$content" | awk "$_HRB_AWK_LIB$_HRB_TSV_AWK"
}

_hrb_tq() { # MODE FILE SPEC1 [KEYVALUE SPEC2]
    local tsv
    tsv="$(_hrb_table "$2")" || return 1
    printf '%s\n' "$tsv" | sed '/^$/d' | _HRB_MODE="$1" _HRB_S1="$3" _HRB_KV="$4" _HRB_S2="$5" awk "$_HRB_AWK_LIB$_HRB_TQ_AWK"
}

column() { _hrb_tq column "$1" "$2"; }                 # FILE NAME:POS
cell() { _hrb_tq cell "$1" "$2" "$3" "$4"; }           # FILE KEYNAME:POS KEYVALUE NAME:POS
rows() { _hrb_tq rows "$1" "${2:-}"; }                 # FILE [NAME:POS]
table() { _hrb_table "$1"; }                           # FILE -> TSV
